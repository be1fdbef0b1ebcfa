"""etp_viz.ops"""
