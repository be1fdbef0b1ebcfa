"""etp_viz.learn"""
