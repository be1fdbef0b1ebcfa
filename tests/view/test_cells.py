"""Cell-level folding (issue 41): each cell or neuron the user wrote is one collapsed ``cell``
cluster of the view model, named by its attribute path and class, with its weights as ports and
its hidden states inside; expanding it shows its equations."""

from __future__ import annotations

import brainstate
import braintools
import jax.numpy as jnp
import pytest

import etp_viz
from etp_viz.view.model import build_view_model

pytestmark = pytest.mark.filterwarnings("ignore:.*feeds no ETP primitive:UserWarning")

#: what a brainstate cell must not show at the top of the first view
HIDDEN_PRIMITIVES = {"concatenate", "split", "slice", "logistic", "custom_jvp_call", "tanh"}


class Net(brainstate.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell
        self.out = brainstate.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.cell(x))


class MyLIF(brainstate.nn.Module):
    """A user's LIF neuron with a braintools surrogate spike (no weights of its own)."""

    def __init__(self, n):
        super().__init__()
        self.V = brainstate.HiddenState(jnp.zeros(n))

    def spike(self, V=None):
        return braintools.surrogate.sigmoid((self.V.value if V is None else V) - 1.0)

    def update(self, current):
        V = 0.9 * (self.V.value - self.spike()) + current
        self.V.value = V
        return self.spike(V)


class SpikingNet(brainstate.nn.Module):
    def __init__(self):
        super().__init__()
        self.win = brainstate.nn.Linear(3, 8)
        self.w = brainstate.ParamState(jnp.ones((8, 8)) * 0.1)
        self.lif = MyLIF(8)
        self.out = brainstate.nn.Linear(8, 2)

    def update(self, x):
        return self.out(self.lif(self.win(x) + self.lif.spike() @ self.w.value))


def _view(model, lift=True):
    brainstate.nn.init_all_states(model)
    return build_view_model(etp_viz.compile_etrace_graph(model, jnp.zeros(3), lift=lift))


def _top_level(vm, expanded=()):
    """The ids drawn at the first view: nodes outside every collapsed box, and the boxes."""
    clusters = {c.id: c for c in vm.clusters}
    drawn = set()
    for node in vm.nodes:
        if node.kind == "param":
            continue
        shown, cluster = node.id, node.cluster
        while cluster is not None:
            box = clusters[cluster]
            if box.kind in ("subjaxpr", "cell") and box.id not in expanded:
                shown = box.id
            cluster = box.parent
        drawn.add(shown)
    return drawn


def _inside(vm, cell_id):
    clusters = {c.id: c for c in vm.clusters}

    def chain(cluster):
        while cluster is not None:
            yield cluster
            cluster = clusters[cluster].parent

    return [n for n in vm.nodes if cell_id in chain(n.cluster)]


CELLS = {
    "LSTMCell": (["cell.W.weight"], ["cell.h", "cell.c"]),
    "GRUCell": (["cell.Wrz.weight", "cell.Wh.weight"], ["cell.h"]),
}


@pytest.mark.parametrize("lift", [True, False], ids=["lift", "plain"])
@pytest.mark.parametrize("kind", sorted(CELLS))
def test_a_brainstate_cell_is_one_node_named_by_its_path_and_class(kind, lift):
    vm = _view(Net(getattr(brainstate.nn, kind)(3, 8)), lift=lift)
    assert vm.check_references() == []
    (cell,) = [c for c in vm.clusters if c.kind == "cell"]
    weights, hidden = CELLS[kind]
    assert (cell.id, cell.label, cell.collapsed) == ("cell:cell", f"cell ({kind})", True)
    assert (cell.module_path, cell.class_name, cell.parent) == ("cell", kind, None)
    assert list(cell.ports) == weights and list(cell.hidden_paths) == hidden
    top = _top_level(vm)
    assert "cell:cell" in top
    nodes = {n.id: n for n in vm.nodes}
    drawn_primitives = {nodes[i].primitive for i in top if i in nodes}
    assert not drawn_primitives & HIDDEN_PRIMITIVES, drawn_primitives
    # the hidden states are inside the cell (their group box nests in it), the readout is not
    inside = {n.id for n in _inside(vm, "cell:cell")}
    for path in hidden:
        assert {f"h:{path}:in", f"h:{path}:out", f"pt:{path}"} <= inside
    readout = [n.id for n in vm.nodes if any("out.weight" in b.title for b in n.badges)]
    readout = [i for i in readout if not i.startswith("p:")]
    assert readout and all(i in top and i not in inside for i in readout)
    # expanding it shows its equations: every weight op of the cell, the gates' nonlinearities
    opened = _top_level(vm, expanded=("cell:cell",))
    assert "cell:cell" not in opened
    shown = {nodes[i].primitive for i in opened if i in nodes}
    assert {"logistic", "tanh"} <= shown
    assert {n.weight_path for n in vm.nodes if n.etp and n.id in opened} >= (
        set(weights) if lift else set()
    )


def test_grouping_is_by_module_not_by_equation_count():
    """LSTMCell's fused W is one weight op per gate block (lead's pass) or one: one cell."""
    vm = _view(Net(brainstate.nn.LSTMCell(3, 8)))
    ops = [n for n in vm.nodes if n.etp and n.weight_path == "cell.W.weight"]
    assert len(ops) >= 1 and all(n.cluster == "cell:cell" for n in ops)
    assert [c.id for c in vm.clusters if c.kind == "cell"] == ["cell:cell"]


def test_a_neuron_and_the_networks_own_weight_ops():
    """A LIF neuron the user wrote is a cell; the network's weight ops stay outside it."""
    vm = _view(SpikingNet())
    (cell,) = [c for c in vm.clusters if c.kind == "cell"]
    assert (cell.label, list(cell.ports), list(cell.hidden_paths)) == ("lif (MyLIF)", [], ["lif.V"])
    inside = _inside(vm, "cell:lif")
    assert {"h:lif.V:in", "h:lif.V:out"} <= {n.id for n in inside}
    assert not any(n.weight_path for n in inside if n.kind == "eqn")
    top = _top_level(vm)
    for path in ("win.weight", "w", "out.weight"):
        op = next(n for n in vm.nodes if n.kind == "eqn" and n.weight_path == path)
        assert op.id in top, path


def test_the_model_itself_is_not_folded():
    """A model that is one cell (hidden states at its root) is drawn as its equations."""
    vm = _view(etp_viz.nn.GRUCell(3, 4))
    assert not [c for c in vm.clusters if c.kind == "cell"]


def test_cells_in_the_json_and_the_text():
    vm = _view(Net(brainstate.nn.LSTMCell(3, 8)))
    (cell,) = [c for c in vm.to_json()["clusters"] if c["kind"] == "cell"]
    assert cell["ports"] == ["cell.W.weight"] and cell["hidden_paths"] == ["cell.h", "cell.c"]
    assert "module=cell class=LSTMCell ports=['cell.W.weight']" in vm.to_text(
        sections=("clusters",)
    )
