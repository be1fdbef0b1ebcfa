"""etp_viz.nn: ETP-wired layers built on brainstate (dense, recurrent cells, spiking neurons)."""

from ._init import constant as constant
from ._init import default_float_dtype as default_float_dtype
from ._init import normal as normal
from ._init import xavier_normal as xavier_normal
from ._init import zeros as zeros
from .linear import Linear as Linear
from .neurons import ALIF as ALIF
from .neurons import LIF as LIF
from .neurons import SURROGATES as SURROGATES
from .neurons import sigmoid_spike as sigmoid_spike
from .neurons import sigmoid_surrogate_grad as sigmoid_surrogate_grad
from .neurons import triangle_spike as triangle_spike
from .neurons import triangle_surrogate_grad as triangle_surrogate_grad
from .rnn import GRUCell as GRUCell
from .rnn import LeakyRateReadout as LeakyRateReadout
from .rnn import LSTMCell as LSTMCell
from .rnn import MGUCell as MGUCell
from .rnn import MiniGRU as MiniGRU
from .rnn import RecurrentCell as RecurrentCell
from .rnn import ValinaRNNCell as ValinaRNNCell
