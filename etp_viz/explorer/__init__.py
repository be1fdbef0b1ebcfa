"""etp_viz.explorer: the Jupyter widget (anywidget), ``show()`` and the offline HTML export.

Needs the ``[explorer]`` extra (anywidget, ipywidgets). ``widget`` holds the static
:class:`Explorer`; ``show`` binds it to a live :class:`etp_viz.live.Session`
(:class:`LiveExplorer`); ``export`` writes one self-contained page; ``bundle`` finds the built
front end (``js/`` → ``static/``).
"""

from .show import LiveExplorer as LiveExplorer
from .show import show as show
from .widget import Explorer as Explorer
