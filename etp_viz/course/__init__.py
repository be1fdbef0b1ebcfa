"""etp_viz.course: self-paced lessons (notebooks 07-10) and their offline pages.

``lessons()`` lists them (name, title, notebook, claim, budget, compute, exercises); a
notebook grades its exercises with ``lesson.check(n, answer)`` (the solutions live in this
package, not in the notebook); ``lesson.export(path)`` writes one self-contained HTML page
(the lesson's text, the graph, a recorded run per learner or knob value with a selector, the
scrubber, the exercises checked in the page). Nothing else in etp_viz imports this package.

Examples
--------
>>> import etp_viz.course as course
>>> [(lesson.name, lesson.budget) for lesson in course.lessons()][:2]
[('fall_behind', 4000), ('eprop_spiking', 8000)]
"""

from .exercises import Exercise as Exercise
from .exercises import Question as Question
from .lessons import Lesson as Lesson
from .lessons import get_lesson as get_lesson
from .lessons import lessons as lessons
