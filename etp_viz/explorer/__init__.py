"""etp_viz.explorer: the Jupyter widget (anywidget), ``show()`` and the offline HTML export.

The widget needs the ``[explorer]`` extra (anywidget, ipywidgets); without it the classes are
built headless (``headless``) so ``save_html`` and ``python -m etp_viz demo`` still write the
offline page, and ``show()`` raises an ``ImportError`` naming the extra. ``widget`` holds the
static :class:`Explorer`; ``live_explorer`` binds it to a live :class:`etp_viz.live.Session`
(:class:`LiveExplorer`); ``export`` writes one self-contained page; ``bundle`` finds the built
front end (``js/`` → ``static/``).
"""

from .live_explorer import LiveExplorer as LiveExplorer
from .live_explorer import show as show
from .widget import Explorer as Explorer
