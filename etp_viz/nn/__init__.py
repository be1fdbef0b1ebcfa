"""etp_viz.nn"""
