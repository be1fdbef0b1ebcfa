"""The gradient claims on deep graphs: the analysis visits each equation a bounded number of
times (issue #32: it rescanned the whole jaxpr per dropped term, quadratic in depth), and its
indexes answer what a brute-force scan of the equations answers (the claims are unchanged).

Structural, not timed: wall-clock numbers live in ``bench/deep_stack.py``.
"""

from __future__ import annotations

import warnings

import brainstate
import jax.numpy as jnp
import pytest

import etp_viz.nn as enn
from etp_viz import _compat
from etp_viz.compiler import claims as claims_module
from etp_viz.compiler import compile_etrace_graph
from etp_viz.compiler._jaxpr import VISITS
from etp_viz.compiler.dataflow import (
    MAX_NAMED_EQNS,
    NEW,
    OLD_C,
    OLD_E,
    OLD_P,
    Y_C,
    Y_E,
    Y_P,
    Flow,
    or_all,
)
from tests.learn import archs
from tests.view.models import make_deep_stack


class GRUStack(brainstate.nn.Module):
    """``depth`` GRU layers in series and a linear readout."""

    def __init__(self, depth: int, width: int = 4):
        super().__init__()
        self.layers = [enn.GRUCell(width, width) for _ in range(depth)]
        self.out = enn.Linear(width, 2)

    def update(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.out(x)


def compiled(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_etrace_graph(model, x)


def gru_stack(depth: int):
    model = GRUStack(depth)
    brainstate.nn.init_all_states(model)
    return compiled(model, jnp.zeros(4))


# -- counting the work ---------------------------------------------------------------------
class Counted(list):
    """A list that counts the items read from it (by index or by iteration)."""

    reads = 0

    def __getitem__(self, i):
        Counted.reads += 1
        return super().__getitem__(i)

    def __iter__(self):
        for item in super().__iter__():
            Counted.reads += 1
            yield item


class CountingFlow(Flow):
    """The flow whose per-equation tables count every read the claims' queries make (a scan
    of every equation per query shows up here even where it bumps no ``VISITS``)."""

    def __init__(self, graph):
        super().__init__(graph)
        self.eqns = Counted(self.eqns)
        self.eqn_in = Counted(self.eqn_in)
        self.reach = Counted(self.reach)


def _claim_visits(depth: int, monkeypatch) -> tuple[int, int]:
    graph = gru_stack(depth)
    monkeypatch.setattr(claims_module, "Flow", CountingFlow)
    VISITS.reset()
    Counted.reads = 0
    for algorithm in ("d_rtrl", "es_d_rtrl"):
        claims_module.gradient_claims(graph, algorithm)
    return VISITS.count + Counted.reads, len(graph.module_info.jaxpr.eqns)


def test_claims_visit_each_equation_a_bounded_number_of_times(monkeypatch):
    """16 -> 64 layers: 4x the equations, about 4x the visits (the old per-term scans of the
    whole jaxpr made it ~16x: ~1,200 visits per equation at 64 layers)."""
    small, small_eqns = _claim_visits(16, monkeypatch)
    large, large_eqns = _claim_visits(64, monkeypatch)
    assert large_eqns >= 3.9 * small_eqns  # the model really grew
    assert large <= 40 * large_eqns, (large, large_eqns)  # a few visits per equation
    assert large / small <= 1.25 * large_eqns / small_eqns, (small, large)


# -- the same answers as a scan of every equation --------------------------------------------
class BruteFlow(Flow):
    """The flow's queries and closures as plain scans and fixed points (the definitions the
    indexes must agree with)."""

    def __init__(self, graph):
        super().__init__(graph)
        self.fast = {
            "signal": self.signal,
            "new_closure": list(self.new_closure),
            "old_total": list(self.old_total),
            "y_reaches": list(self.y_reaches),
            "readers": list(self.readers),
        }
        at = self.at_memory
        signal, changed = self.at_output[NEW], True
        while changed:
            changed = False
            for k in range(len(at)):
                if signal >> k & 1 and at[k][NEW] & ~signal:
                    signal, changed = signal | at[k][NEW], True
        closure, changed = [a[NEW] for a in at], True
        while changed:
            changed = False
            for k, reads in enumerate(closure):
                wider = reads | or_all(closure[j] for j in range(len(at)) if reads >> j & 1)
                if wider != reads:
                    closure[k], changed = wider, True
        old = [a[OLD_C] | a[OLD_E] | a[OLD_P] for a in at]
        self.signal, self.new_closure = signal, closure
        self.old_total = [
            old[k] | or_all(old[j] for j in range(len(at)) if closure[k] >> j & 1)
            for k in range(len(at))
        ]
        self.y_reaches = [
            sum(1 << k for k, a in enumerate(at) if (a[Y_C] | a[Y_E] | a[Y_P]) >> r & 1)
            for r in range(len(self.relations))
        ]
        self.readers = [
            sum(1 << k for k, a in enumerate(at) if (old[k] | a[NEW]) >> j & 1)
            for j in range(len(at))
        ]

    def closure(self, start):
        reach, changed = start, True
        while changed:
            changed = False
            for k, at in enumerate(self.at_memory):
                if not reach >> k & 1 and (at[OLD_C] | at[OLD_E] | at[OLD_P] | at[NEW]) & reach:
                    reach, changed = reach | 1 << k, True
        return reach

    def eqns_where(self, table, bits, reach, exclude=-1, keep=None):
        tables = table if isinstance(table, tuple) else (table,)
        found = [
            i
            for i, union in enumerate(self.eqn_in)
            if i != exclude
            and or_all(union[t] for t in tables) & bits
            and self.reach[i] & reach
            and (keep is None or keep(i))
        ]
        return tuple(found[:MAX_NAMED_EQNS])

    def reading(self, bits, reach):
        return self._scan({m.invar for k, m in enumerate(self.memories) if bits >> k & 1}, reach)

    def reading_new(self, bits, reach):
        return self._scan({m.outvar for k, m in enumerate(self.memories) if bits >> k & 1}, reach)

    def _scan(self, variables, reach):
        found = [
            i
            for i, eqn in enumerate(self.eqns)
            if self.reach[i] & reach
            and any(_compat.is_var(v) and v in variables for v in eqn.invars)
        ]
        return tuple(found[:MAX_NAMED_EQNS])


def _graphs():
    yield "gru_stack_12", gru_stack(12)
    yield "gru_lstm_vanilla_stack", compiled(*make_deep_stack(target_eqns=400))
    for name, arch in {
        "dense_spiking_reads_old": archs.Arch(
            (archs.Layer(states=2, rec="dense", act="spike", reads="old"), archs.Layer()),
            feedback="mix",
        ),
        "coupled_shared": archs.Arch(
            (archs.Layer(rec="mix", cross=True), archs.Layer(rec="concat", bias="plain")),
            shared=True,
            feedback="etp",
        ),
    }.items():
        yield name, compiled(archs.build(arch), archs.inputs(arch, 1)[0])


GRAPHS = dict(_graphs())


@pytest.mark.parametrize("name", list(GRAPHS))
def test_claims_equal_those_of_brute_force_scans(name, monkeypatch):
    graph = GRAPHS[name]
    fast = {alg: claims_module.gradient_claims(graph, alg) for alg in ("d_rtrl", "es_d_rtrl")}
    made = []

    class Recording(BruteFlow):
        def __init__(self, graph):
            super().__init__(graph)
            made.append(self)

    monkeypatch.setattr(claims_module, "Flow", Recording)
    for alg, claims in fast.items():
        assert dict(claims_module.gradient_claims(graph, alg)) == dict(claims), alg
    brute = made[0]
    for field, value in brute.fast.items():
        assert value == getattr(brute, field), field


def test_a_deep_stack_drops_its_own_recurrence_and_every_later_layers_future():
    """Layer ``L`` of a GRU stack: approximate, dropping its own ``h -> h`` through its ETP
    ops and the future of every layer above (the equations that read their previous ``h``),
    the reason naming the first few of them."""
    depth = 12
    graph = gru_stack(depth)
    claims = graph.gradient_claims("d_rtrl")
    minfo = graph.module_info
    consumers, producer = minfo.def_use.consumers, minfo.def_use.producer
    old = {p: v for p, v in minfo.hidden_path_to_invar.items()}
    new = minfo.hidden_path_to_outvar
    reads_old = {}
    etp_ops = {}
    for layer in range(depth):
        path = next(p for p in old if p[:2] == ("layers", layer))
        readers = consumers[old[path]]
        reads_old[layer] = set(readers[:MAX_NAMED_EQNS])
        span = range(min(readers), producer[new[path]] + 1)
        etp_ops[layer] = {i for i in span if minfo.jaxpr.eqns[i].primitive.name.startswith("etp")}
    for layer in range(depth):
        claim = claims[f"layers.{layer}.Wz.weight"]
        above = range(layer + 1, depth)
        assert claim.kind == "approximate" and claim.online
        expected = etp_ops[layer].union(*(reads_old[m] for m in above))
        assert set(claim.dropped) == expected, layer
        for m in list(above)[:7]:  # the reason names 8 terms: h -> h, then 7 layers above
            assert f"drops the effect on layers.{m}.h's future states" in claim.reason
        if 1 + len(above) > 8:
            assert claim.reason.endswith(f"and {len(above) - 7} more dropped term(s)")
    assert claims["out.weight"].kind == "exact"
