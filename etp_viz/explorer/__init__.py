"""etp_viz.explorer: the view model, its DOT rendering and (with the [explorer] extra) the widget.

``view_model`` and ``dot`` import without anywidget/ipywidgets.
"""

from .dot import render_svg as render_svg
from .dot import to_dot as to_dot
from .view_model import ViewModel as ViewModel
from .view_model import build_view_model as build_view_model
