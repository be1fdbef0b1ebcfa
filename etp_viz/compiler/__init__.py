"""etp_viz.compiler"""
