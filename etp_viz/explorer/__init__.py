"""etp_viz.explorer"""
