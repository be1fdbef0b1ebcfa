"""The zoo, measured (issue 41): each model of ``zoo_models.CATALOGUE`` learned online as written.

For every catalogue entry that can be built here (``Entry.available() == ''``) and every learner
(``d_rtrl``, ``es_d_rtrl`` (decay 0.9), and ``eprop`` on the spiking entries), the model is
compiled with ``lift=True`` and checked with ``etp_viz.verify`` against BPTT over ``--steps``
steps in float64 (loss: ``sum(y**2)`` per step, summed; ``verify``'s default without targets).
Recorded per model x learner: each weight leaf's claim (and each block of a fused gate weight),
its cosine and relative error vs BPTT, the norms, and the contradictions.

With ``--braintrace`` (the 3.12 stack, where braintrace 0.2.8 is installed as a benchmark peer),
braintrace's ``D_RTRL(model)`` / ``ES_D_RTRL(model, 0.9)`` runs on the same model object (same
weights, same initial states, same inputs, same loss): its per-step online gradients, summed,
against the same BPTT gradient (``etp_viz.learn.bptt.bptt_gradients``). braintrace only traces
its own ops, so on plain brainstate it may fail (its error is recorded) or give silent zeros
(its online norm is recorded beside BPTT's).

::

    .venv/bin/python bench/zoo.py                  # 3.11 stack -> results/zoo-<date>-py311.json
    .venv312/bin/python bench/zoo.py --braintrace  # 3.12 stack -> results/zoo-<date>-py312.json
    .venv/bin/python bench/zoo.py --only GRU,LSTM  # entries whose name holds one of the words
    .venv/bin/python bench/zoo.py --table bench/results/zoo-<date>-py312.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import brainstate

brainstate.environ.set(precision=64)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _machine import machine  # noqa: E402
from zoo_models import CATALOGUE  # noqa: E402

RESULTS = HERE / "results"
STEPS = 8
DECAY = 0.9
LEARNERS = ("d_rtrl", "es_d_rtrl")
#: words of the entry names of spiking models (eprop is measured on them too)
SPIKING = ("LIF",)


def _loss(y):
    """verify's default loss without targets: ``sum(y**2)`` over every output leaf."""
    return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(y))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _row(row) -> dict:
    """A verify row as JSON (the reason shortened)."""
    out = row.to_json()
    out["reason"] = _short(out.get("reason", ""), 240)
    out.pop("unverified", None)
    return out


def _summary(rows: list[dict]) -> dict:
    learned = [r for r in rows if r["claim"] != "none"]
    cosines = [r["cosine"] for r in learned if r["verified"] and r["cosine"] is not None]
    errors = [r["relative_error"] for r in learned if r["verified"]]
    errors = [e for e in errors if e is not None]
    return {
        "learned": [r["path"] for r in learned],
        "none": [r["path"] for r in rows if r["claim"] == "none"],
        "claims": {r["path"]: r["claim"] for r in rows},
        "cosine_min": min(cosines) if cosines else None,
        "cosine_median": statistics.median(cosines) if cosines else None,
        "relative_error_max": max(errors) if errors else None,
        "relative_error_median": statistics.median(errors) if errors else None,
    }


def measure_etp(entry, model, xs, learner: str) -> dict:
    import etp_viz

    options = {"decay": DECAY} if learner == "es_d_rtrl" else {}
    start = time.perf_counter()
    try:
        report = etp_viz.verify(model, xs, algorithm=learner, lift=True, **options)
    except Exception as error:  # noqa: BLE001 - recorded, the zoo goes on
        return {"error": _short(f"{type(error).__name__}: {error}", 600)}
    rows = [_row(r) for r in report.rows]
    blocks = [_row(r) for r in report.blocks]
    return {
        "seconds": round(time.perf_counter() - start, 2),
        "rows": rows,
        "blocks": blocks,
        "contradictions": len(report.contradictions),
        "unverified": len(report.unverified),
        "verdict": report.verdict(),
        **_summary(rows),
    }


def _leaves(grads: dict) -> dict:
    """``{leaf name: flat float64 array}`` of ``{path: tree}`` gradients (verify's names)."""
    from etp_viz.compiler.dataflow import leaf_name

    out = {}
    for path, tree in grads.items():
        path = tuple(path)
        for key, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            value = getattr(leaf, "mantissa", leaf)  # a saiunit Quantity: its number
            out[leaf_name(path, key)] = np.asarray(value, np.float64).ravel()
    return out


def _compare(online: dict, true: dict) -> list[dict]:
    rows = []
    for name, t in true.items():
        o = online.get(name)
        o = np.zeros_like(t) if o is None or o.shape != t.shape else o
        n_on, n_true = float(np.linalg.norm(o)), float(np.linalg.norm(t))
        diff = float(np.linalg.norm(o - t))
        cosine = float(o @ t / (n_on * n_true)) if n_on > 0 and n_true > 0 else None
        rel = diff / n_true if n_true > 0 else None
        rows.append(
            {
                "path": name,
                "cosine": cosine,
                "relative_error": rel,
                "online_norm": n_on,
                "true_norm": n_true,
                "missing": name not in online,
            }
        )
    return rows


def _state_values(model) -> list:
    return [(s, s.value) for s in brainstate.graph.states(model).values()]


def _restore(saved: list) -> None:
    for state, value in saved:
        state.value = value


def measure_braintrace(model, xs, learner: str, true: dict) -> dict:
    """braintrace 0.2.8's online gradient (per-step grads over ``alg.param_states``, summed)
    on ``model``, against ``true`` (BPTT's leaves)."""
    import braintrace

    saved = _state_values(model)
    start = time.perf_counter()
    try:
        if learner == "d_rtrl":
            alg = braintrace.D_RTRL(model)
        else:
            alg = braintrace.ES_D_RTRL(model, DECAY)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            alg.compile_graph(xs[0])
        params = alg.param_states

        def one(x):
            return _loss(alg(x))

        grad_step = brainstate.transform.grad(one, params, return_value=True, check_states=False)
        total = None
        for t in range(xs.shape[0]):
            grads, _ = grad_step(xs[t])
            grads = dict(grads)
            total = grads if total is None else jax.tree.map(jnp.add, total, grads)
    except Exception as error:  # noqa: BLE001 - what braintrace says is the finding
        _restore(saved)
        return {"error": _short(f"{type(error).__name__}: {error}", 400)}
    _restore(saved)
    rows = _compare(_leaves(total), true)
    learned = [r for r in rows if r["online_norm"] > 0]
    cosines = [r["cosine"] for r in learned if r["cosine"] is not None]
    record = {
        "seconds": round(time.perf_counter() - start, 2),
        "rows": rows,
        "zero": [r["path"] for r in rows if r["online_norm"] == 0 and r["true_norm"] > 0],
        "nonzero": [r["path"] for r in learned],
        "cosine_min": min(cosines) if cosines else None,
        "cosine_median": statistics.median(cosines) if cosines else None,
        "warnings": sorted({_short(str(w.message), 200) for w in caught})[:5],
    }
    return record


def _sequence_loss(model, xs, saved: list) -> float:
    """The summed loss of one run over ``xs`` from the saved states (eager, float64)."""
    _restore([(s, v) for s, v in saved if not isinstance(s, brainstate.ParamState)])
    return float(sum(_loss(model(x)) for x in xs))


def check_bptt(model, xs, eps: float = 1e-6) -> dict:
    """The BPTT reference checked by central finite differences, one random direction per
    weight leaf: ``{leaf: relative difference of <grad, v> and (L(w + eps v) - L(w - eps v)) /
    2 eps}``. Not for spiking models (the forward's step has derivative 0 almost everywhere;
    BPTT uses the surrogate)."""
    from etp_viz.compiler.dataflow import leaf_name
    from etp_viz.learn.bptt import bptt_gradients

    saved = _state_values(model)
    try:
        true = bptt_gradients(model, xs, _loss_over_time)
        states = {tuple(p): s for p, s in brainstate.graph.states(model).items()}
        rng = np.random.default_rng(0)
        out = {}
        for path, tree in true.items():
            state = states[tuple(path)]
            value = state.value
            flat, treedef = jax.tree_util.tree_flatten_with_path(value)
            grads = jax.tree.leaves(tree)
            for i, ((key, leaf), grad) in enumerate(zip(flat, grads)):
                v = rng.standard_normal(np.shape(leaf))
                losses = []
                for sign in (1.0, -1.0):
                    leaves = [w for _, w in flat]
                    leaves[i] = leaf + sign * eps * v
                    _restore(saved)
                    state.value = jax.tree_util.tree_unflatten(treedef, leaves)
                    losses.append(_sequence_loss(model, xs, saved))
                numeric = (losses[0] - losses[1]) / (2 * eps)
                analytic = float(np.sum(np.asarray(grad) * v))
                scale = max(abs(numeric), abs(analytic), 1e-12)
                out[leaf_name(tuple(path), key)] = abs(numeric - analytic) / scale
                _restore(saved)
        return out
    finally:
        _restore(saved)


def bptt_leaves(model, xs) -> dict:
    from etp_viz.learn.bptt import bptt_gradients

    saved = _state_values(model)
    try:
        return _leaves(bptt_gradients(model, xs, lambda outs: _loss_over_time(outs)))
    finally:
        _restore(saved)


def _loss_over_time(outs):
    return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(outs))


def measure(entry, steps: int, with_braintrace: bool) -> dict:
    record = {"name": entry.name, "needs": list(entry.needs), "batch": entry.batch}
    why = entry.available()
    if why:
        record["skipped"] = why
        return record
    try:
        brainstate.random.seed(0)  # the same initial weights whatever ran before
        model = entry.model()
    except Exception as error:  # noqa: BLE001
        record["skipped"] = _short(f"build failed: {type(error).__name__}: {error}")
        return record
    xs = entry.inputs(steps)
    learners = list(LEARNERS)
    spiking = any(word in entry.name for word in SPIKING)
    if not spiking:  # a wrong BPTT reference would make every number below wrong
        try:
            record["bptt_check"] = check_bptt(model, xs)
        except Exception as error:  # noqa: BLE001
            record["bptt_check"] = {"error": _short(f"{type(error).__name__}: {error}")}
        bad = {
            k: v for k, v in record["bptt_check"].items() if not isinstance(v, float) or v > 1e-4
        }
        print(f"  {entry.name} BPTT vs finite differences: {bad or 'agree'}", flush=True)
    record["etp_viz"] = {}
    if spiking:
        learners.append("eprop")
    for learner in learners:
        record["etp_viz"][learner] = measure_etp(entry, model, xs, learner)
        print(f"  {entry.name} etp_viz {learner}: {_brief(record['etp_viz'][learner])}", flush=True)
    if with_braintrace:
        true = bptt_leaves(model, xs)
        record["bptt_norms"] = {k: float(np.linalg.norm(v)) for k, v in true.items()}
        # the same BPTT as verify's: its norms against verify's (d_rtrl) true norms
        rows = record["etp_viz"]["d_rtrl"].get("rows", [])
        record["bptt_agrees_with_verify"] = max(
            (
                abs(record["bptt_norms"].get(r["path"], np.nan) - r["true_norm"])
                / max(r["true_norm"], 1e-300)
                for r in rows
            ),
            default=None,
        )
        record["braintrace"] = {}
        for learner in LEARNERS:
            result = measure_braintrace(model, xs, learner, true)
            record["braintrace"][learner] = result
            print(f"  {entry.name} braintrace {learner}: {_brief(result)}", flush=True)
    return record


def _brief(result: dict) -> str:
    if "error" in result:
        return "ERROR " + result["error"][:160]
    if "contradictions" in result:
        return (
            f"learned {result['learned']} none {result['none']} cos min "
            f"{_num(result['cosine_min'])} contradictions {result['contradictions']}"
        )
    return f"nonzero {result['nonzero']} zero {result['zero']} cos min {_num(result['cosine_min'])}"


def _num(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _git_commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE
    )
    return proc.stdout.strip()


def _importable(name: str) -> str:
    try:
        module = __import__(name)
    except Exception as error:  # noqa: BLE001
        return f"does not import ({type(error).__name__}: {_short(error, 120)})"
    return getattr(module, "__version__", "imports")


def run(args) -> dict:
    warnings.simplefilter("ignore")
    entries = [
        e for e in CATALOGUE if not args.only or any(w in e.name for w in args.only.split(","))
    ]
    packages = ["brainstate", "etp_viz"] + (["braintrace"] if args.braintrace else [])
    record = {
        "date": datetime.date.today().isoformat(),
        "commit": _git_commit(),
        "machine": machine(tuple(packages)),
        "optional_packages": {
            name: _importable(name)
            for name in ("braintools", "brainevent", "numba", "brainpy", "saiunit")
        },
        "steps": args.steps,
        "dtype": str(jnp.zeros(()).dtype),
        "loss": "sum over steps of sum(y**2) (verify's default without targets)",
        "es_d_rtrl_decay": DECAY,
        "braintrace": bool(args.braintrace),
        "entries": [],
    }
    for entry in entries:
        print(entry.name, flush=True)
        record["entries"].append(measure(entry, args.steps, args.braintrace))
    return record


def _group_rows(rows: list[dict]) -> dict:
    """``{weight: [leaf rows]}``: a leaf ``X.k`` goes with the leaf ``X`` when there is one
    (a ``ParamState``'s ``weight`` and ``bias``, ``gain``), else it is a weight of its own."""
    names = {r["path"] for r in rows}
    groups: dict = {}
    for row in rows:
        head = row["path"].rsplit(".", 1)[0]
        key = head if "." in row["path"] and head in names else row["path"]
        groups.setdefault(key, []).append(row)
    return groups


def _combined(rows: list[dict]) -> tuple:
    """``(cosine, relative error, online norm, true norm)`` of several leaves as one vector."""
    n_on = float(np.sqrt(sum(r["online_norm"] ** 2 for r in rows)))
    n_true = float(np.sqrt(sum(r["true_norm"] ** 2 for r in rows)))
    diff2 = [
        (r["relative_error"] * r["true_norm"]) ** 2
        if r["true_norm"] > 0 and r["relative_error"] is not None
        else r["online_norm"] ** 2
        for r in rows
    ]
    dot = sum((r["online_norm"] ** 2 + r["true_norm"] ** 2 - d) / 2 for r, d in zip(rows, diff2))
    cosine = dot / (n_on * n_true) if n_on > 0 and n_true > 0 else None
    rel = float(np.sqrt(sum(diff2))) / n_true if n_true > 0 else None
    return cosine, rel, n_on, n_true


def _short_name(path: str) -> str:
    """``cell.Wh.weight`` -> ``cell.Wh``, ``rec.weight`` -> ``rec`` (brainstate's Linear-like
    layers keep ``{weight, bias}`` in a ParamState named ``weight``)."""
    return path[: -len(".weight")] if path.endswith(".weight") else path


def _claim_of(rows: list[dict]) -> str:
    claims = {r["claim"] for r in rows}
    for claim in ("none", "approximate", "exact"):
        if claim in claims:
            return claim if len(claims) == 1 or claim != "none" else "approximate"
    return "?"


def _blocks_text(result: dict, group: str) -> str:
    """``[r none, z 0.971]``: the blocks of a fused weight (its leaves' blocks combined)."""
    by_label: dict = {}
    for row in result.get("blocks", []):
        base = row["path"].split("[", 1)[0]
        if base != group and base.rsplit(".", 1)[0] != group:
            continue
        label = row["path"].rsplit(" ", 1)[-1].strip("()") if "(" in row["path"] else (
            row["path"].split("[", 1)[1].split("]")[0])  # fmt: skip
        by_label.setdefault(label, []).append(row)
    parts = []
    for label, rows in by_label.items():
        if all(r["claim"] == "none" for r in rows):
            parts.append(f"{label} none")
        else:
            parts.append(f"{label} {_num(_combined(rows)[0], 3)}")
    return f" [{', '.join(parts)}]" if parts else ""


def _etp_text(result: dict) -> tuple[str, str]:
    """(learned online: ``weight cosine (rel. err)`` each, not learned: ``weight``)."""
    learned, none = [], []
    for group, rows in _group_rows(result["rows"]).items():
        claim = _claim_of(rows)
        name = f"`{_short_name(group)}`"
        if claim == "none":
            none.append(name)
            continue
        cosine, rel, _, _ = _combined(rows)
        text = f"{name} {_num(cosine, 3)} ({_sci(rel)})"
        if claim == "exact":
            text = f"{name} exact"
        blocks = _blocks_text(result, group)
        learned.append(text + blocks)
        dropped = [
            p.split(" none")[0] for p in blocks.strip(" []").split(", ") if p.endswith("none")
        ]
        if dropped:
            none.append(f"{name} columns of {', '.join(dropped)}")
    return "; ".join(learned) or "–", ", ".join(none) or "–"


def _bt_text(result) -> str:
    if result is None:
        return "not run"
    if "error" in result:
        return f"fails: {result['error'][:110]}"
    parts, zero = [], []
    for group, rows in _group_rows(result["rows"]).items():
        name = f"`{_short_name(group)}`"
        cosine, rel, n_on, n_true = _combined(rows)
        if n_on == 0 and n_true > 0:
            zero.append(name)
        else:
            parts.append(f"{name} {_num(cosine, 3)} ({_sci(rel)})")
    text = "; ".join(parts)
    if zero:
        text += ("; " if text else "") + f"**silent 0**: {', '.join(zero)}"
    return text or "–"


def table(record: dict, leaves: bool = False) -> str:
    """Markdown: one row per model x learner; per weight (a ParamState's leaves together) the
    cosine and relative error of its summed online gradient vs BPTT, a fused weight's blocks
    in brackets; braintrace's number on the same model beside it when recorded; then the
    skipped entries. ``leaves``: one column of per-leaf rows instead (every leaf and block)."""
    has_bt = record.get("braintrace")
    head = "| model | learner | learned online: cosine (rel. error) vs BPTT | none | contr. |"
    rule = "|---|---|---|---|---|"
    if has_bt:
        head += " braintrace 0.2.8, same model |"
        rule += "---|"
    lines = [head, rule]
    skipped = []
    for entry in record["entries"]:
        if "skipped" in entry:
            skipped.append(f"- {entry['name']}: {entry['skipped']}")
            continue
        for learner, result in entry["etp_viz"].items():
            if "error" in result:
                cells = [f"error: {result['error'][:120]}", "", ""]
            elif leaves:
                rows = result["rows"] + result["blocks"]
                cells = [
                    "<br>".join(
                        f"`{r['path']}` {r['claim']} {_num(r['cosine'], 3)} "
                        f"({_sci(r['relative_error'])})"
                        for r in rows
                    ),
                    "",
                    str(result["contradictions"]),
                ]
            else:
                learned, none = _etp_text(result)
                learned += _reference_warning(entry)
                cells = [learned, none, str(result["contradictions"])]
            line = f"| {entry['name']} | {learner} | " + " | ".join(cells) + " |"
            if has_bt:
                bt = entry.get("braintrace", {})
                line += f" {_bt_text(bt.get(learner)) if learner in LEARNERS else ''} |"
            lines.append(line)
    if skipped:
        lines += ["", "Skipped here:", *skipped]
    return "\n".join(lines)


def _reference_warning(entry: dict) -> str:
    """A note when BPTT's gradient disagrees with finite differences (the reference is off)."""
    check = entry.get("bptt_check") or {}
    if "error" in check:
        return f" (BPTT reference not checked: {check['error'][:80]})"
    bad = [f"`{_short_name(k)}` {v:.2g}" for k, v in check.items() if v > 1e-4]
    if not bad:
        return ""
    return f" **BPTT reference wrong here** (vs finite differences: {', '.join(bad)})"


def _sci(value) -> str:
    return "-" if value is None else f"{value:.2g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--braintrace", action="store_true", help="measure braintrace too")
    parser.add_argument("--only", default=None, help="entries whose name contains one of these")
    parser.add_argument("--out", default=None)
    parser.add_argument("--table", default=None, help="print the table of a recorded JSON")
    parser.add_argument("--leaves", action="store_true", help="--table: one line per leaf")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text()), leaves=args.leaves))
        return 0
    record = run(args)
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    out = Path(args.out) if args.out else RESULTS / f"zoo-{record['date']}-{tag}.json"
    out.write_text(json.dumps(record, indent=1))
    print(table(record))
    print(f"recorded {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
