"""etp_viz.nn: ETP-wired layers built on brainstate.

Dense and variants (``Linear``, ``SignedWLinear``, ``ScaledWSLinear``, ``SparseLinear``,
``LoRA``, ``GroupedLinear``), ``Embedding``, convolutions (``Conv1d``, ``Conv2d``,
``Conv3d``), recurrent cells (``rnn``:
``ValinaRNNCell``, ``GRUCell``, ``LSTMCell``, ``MGUCell``, ``MiniGRU``, ``LeakyRateReadout``;
``cells``: ``URLSTMCell``, ``MinimalRNNCell``, ``MiniLSTM``, ``LRUCell``, ``CFNCell``) and
spiking neurons (``LIF``, ``ALIF``, ``SparseLIF``: sparse recurrent, event-driven).
"""

from ._init import constant as constant
from ._init import default_float_dtype as default_float_dtype
from ._init import normal as normal
from ._init import xavier_normal as xavier_normal
from ._init import zeros as zeros
from .cells import CFNCell as CFNCell
from .cells import LRUCell as LRUCell
from .cells import MiniLSTM as MiniLSTM
from .cells import MinimalRNNCell as MinimalRNNCell
from .cells import URLSTMCell as URLSTMCell
from .conv import Conv1d as Conv1d
from .conv import Conv2d as Conv2d
from .conv import Conv3d as Conv3d
from .embedding import Embedding as Embedding
from .embedding import GroupedLinear as GroupedLinear
from .linear import Linear as Linear
from .linear_variants import LoRA as LoRA
from .linear_variants import ScaledWSLinear as ScaledWSLinear
from .linear_variants import SignedWLinear as SignedWLinear
from .linear_variants import SparseLinear as SparseLinear
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
from .sparse import SparseLIF as SparseLIF
