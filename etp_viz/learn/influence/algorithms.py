r"""Three ways to keep the influence matrix :math:`M = \partial h/\partial\theta` online.

* :class:`RTRL` (Williams & Zipser 1989): all of it, :math:`M^t = J_h M^{t-1} + J_\theta`.
  Exact (equal to BPTT for a sum of per-step losses) and :math:`O(n\,p)` memory,
  :math:`O(n^2 p)` time per step: the reference the approximations are measured against.
* :class:`SnAp` (Menick et al. 2021, "Practical real time recurrent learning with a sparse
  approximation"): only the entries :math:`M_{ik}` where parameter :math:`k` can reach unit
  :math:`i` within ``n`` steps of the step's sparsity pattern (``n=1``: the units a parameter
  drives directly; for a dense single-layer RNN ``n=2`` is already the full pattern). When the
  pattern closes (``n`` at least the coupling depth) it is RTRL.
* :class:`UORO` (Tallec & Ollivier 2018, "Unbiased online recurrent optimization"): a rank-1
  estimate :math:`M \approx \tilde h\,\tilde\theta^\top` refreshed with random signs
  :math:`\nu\in\{\pm1\}^n` every step: :math:`\tilde h' = \rho_0 J_h\tilde h + \rho_1\nu`,
  :math:`\tilde\theta' = \tilde\theta/\rho_0 + \nu^\top J_\theta/\rho_1` with the variance-
  minimising :math:`\rho_0 = \sqrt{\|\tilde\theta\|/\|J_h\tilde h\|}`,
  :math:`\rho_1 = \sqrt{\|\nu^\top J_\theta\|/\|\nu\|}`. Unbiased: the mean over sign
  sequences is RTRL's gradient. :math:`O(n + p)` memory.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .learner import InfluenceLearner
from .patterns import closed_pattern, one_more_step, step_patterns
from .tiles import TiledInfluence, find_tiles, group_tiles, stored_entries

__all__ = ["RTRL", "SPARSE_AT_MOST", "STORAGES", "UORO", "SnAp"]

_EPS = 1e-7
#: how a patterned learner may store its influence (:class:`PatternedRTRL`)
STORAGES = ("auto", "sparse", "dense")
#: ``storage="auto"`` keeps tiles where they hold at most this share of the ``n p`` entries
SPARSE_AT_MOST = 0.5


class RTRL(InfluenceLearner):
    """Exact real-time recurrent learning (see the module docstring).

    Examples
    --------
    >>> alg = etp_viz.RTRL(model); alg.compile_graph(x0)       # doctest: +SKIP
    """

    claim_family = "rtrl"

    def init_influence(self) -> Any:
        return jnp.zeros((self.num_hidden, self.num_params), self._theta_vec.dtype)

    def update_influence(self, influence: Any, jac: Any) -> Any:
        return jac.jac_h() @ influence + jac.jac_theta()

    def contract(self, signal: Any, influence: Any) -> Any:
        return signal @ influence

    def refine_claims(self, claims: Any) -> Any:
        for key, claim in list(claims.items()):
            claims[key] = dataclasses.replace(
                claim, kind="exact", reason="", dropped=(), online=True, algorithm="rtrl"
            )
        return claims


class PatternedRTRL(RTRL):
    """RTRL with the influence kept only on a boolean ``(n, p)`` pattern (SnAp, OSTL).

    ``storage`` says how: ``"sparse"`` only the pattern's entries, as dense tiles
    (:class:`.tiles.TiledInfluence`, Jacobian entries from a few JVPs / VJPs);
    ``"dense"`` an ``(n, p)`` array masked each step; ``"auto"`` (default) the tiles where
    they hold at most :data:`SPARSE_AT_MOST` of the ``n p`` entries, else the dense array
    (a pattern that is all but full: SnAp-2 on a dense single-layer RNN is RTRL). The two
    give the same gradients.
    """

    def __init__(self, model: Any, name: str | None = None, storage: str = "auto"):
        if storage not in STORAGES:
            raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")
        super().__init__(model, name=name)
        self.storage = storage
        self.tiles: TiledInfluence | None = None

    def keep(self, pattern: np.ndarray, closed: np.ndarray) -> None:
        """Keep ``pattern``; ``closed`` is every entry RTRL can fill (per parameter, all of
        them kept: its gradient is exact)."""
        self.pattern = np.asarray(pattern, bool)  # host memory: the tiles never read it
        self.covered = (pattern | ~closed).all(axis=0)
        self.exact = bool(self.covered.all())
        self.support = np.asarray(pattern & closed)
        self.tiles = None
        if self.storage == "dense":
            return
        reach_h, reach_theta = step_patterns(self)
        groups = group_tiles(find_tiles(np.asarray(pattern, bool), reach_h))
        if self.storage == "sparse" or stored_entries(groups) <= SPARSE_AT_MOST * pattern.size:
            # a while_loop has no reverse mode, a custom_vjp no forward mode
            forward = self.forward_only or not self.reverse_only
            self.tiles = TiledInfluence(
                groups, reach_h, reach_theta, forward=forward, reverse=not self.forward_only
            )

    def influence_support(self) -> np.ndarray:
        """The kept entries RTRL can fill: where the masked influence can be non-zero."""
        return self.support

    def init_influence(self) -> Any:
        if self.tiles is None:
            return super().init_influence()
        return self.tiles.zeros(self.theta_vec.dtype)

    def update_influence(self, influence: Any, jac: Any) -> Any:
        if self.tiles is None:
            return jnp.where(self.pattern, super().update_influence(influence, jac), 0.0)
        return self.tiles.update(influence, jac)

    def contract(self, signal: Any, influence: Any) -> Any:
        if self.tiles is None:
            return super().contract(signal, influence)
        return self.tiles.contract(signal, influence)

    def dense_influence(self) -> Any:
        """The ``(n, p)`` influence the learner holds now, whichever its storage."""
        value = self._influence_state().value
        return value if self.tiles is None else self.tiles.dense(value)


class SnAp(PatternedRTRL):
    """RTRL with the influence kept on the ``n``-step sparsity pattern (SnAp-n).

    Parameters
    ----------
    model : brainstate.nn.Module
    n : int
        Steps of reach kept (``n >= 1``).
    storage : {"auto", "sparse", "dense"}
        How the kept entries are stored (:class:`PatternedRTRL`): SnAp-1 on a GRU of 128
        units at batch 8 keeps 19.3 M of the 57.0 M entries in tiles.
    """

    mask_same_step = True
    claim_family = "snap"  # its claims carry "snap<n>" (``adjust_claims``)

    def __init__(self, model: Any, n: int = 2, name: str | None = None, storage: str = "auto"):
        if int(n) < 1 or int(n) != n:
            raise ValueError(f"SnAp's n must be a positive integer, got {n!r}")
        super().__init__(model, name=name, storage=storage)
        self.n = int(n)

    def prepare(self) -> None:
        reach_h, reach_theta = step_patterns(self)
        pattern = reach_theta
        for _ in range(self.n - 1):
            pattern = one_more_step(reach_h, pattern)
        closed, self.depth = closed_pattern(reach_h, reach_theta)
        self.keep(pattern, closed)

    def claim_label(self) -> str:
        return f"SnAp-{self.n}"

    def refine_claims(self, claims: Any) -> Any:
        reason = (
            f"SnAp-{self.n} keeps the influence entries a parameter reaches within {self.n} "
            f"step(s); the step's coupling needs {self.depth}"
        )
        return self.claims_by_columns(claims, self.covered, reason, name=f"snap{self.n}")


class UORO(InfluenceLearner):
    """Unbiased online recurrent optimisation: a rank-1 influence estimate.

    Parameters
    ----------
    model : brainstate.nn.Module
    projection_key : jax PRNG key or int
        Seeds the random signs (one fresh draw per step).
    """

    claim_family = "uoro"

    def __init__(self, model: Any, projection_key: Any = 0, name: str | None = None):
        super().__init__(model, name=name)
        if isinstance(projection_key, int):
            projection_key = jax.random.PRNGKey(projection_key)
        self.projection_key = projection_key

    def init_influence(self) -> Any:
        dtype = self._theta_vec.dtype
        return {
            "h": jnp.zeros((self.num_hidden,), dtype),
            "theta": jnp.zeros((self.num_params,), dtype),
            "key": jnp.asarray(self.projection_key),
        }

    def update_influence(self, influence: Any, jac: Any) -> Any:
        key, sub = jax.random.split(influence["key"])
        h_tilde, theta_tilde = influence["h"], influence["theta"]
        nu = jax.random.rademacher(sub, h_tilde.shape, h_tilde.dtype)
        forward = jac.jvp_h(h_tilde)
        projected = jac.vjp_theta(nu)
        rho0 = jnp.sqrt((jnp.linalg.norm(theta_tilde) + _EPS) / (jnp.linalg.norm(forward) + _EPS))
        rho1 = jnp.sqrt((jnp.linalg.norm(projected) + _EPS) / (jnp.linalg.norm(nu) + _EPS))
        return {
            "h": rho0 * forward + rho1 * nu,
            "theta": theta_tilde / rho0 + projected / rho1,
            "key": key,
        }

    def contract(self, signal: Any, influence: Any) -> Any:
        return (signal @ influence["h"]) * influence["theta"]

    def influence_support(self) -> np.ndarray:
        """``h̃ θ̃ᵀ``: ``h̃`` is dense (fresh signs on every entry), ``θ̃`` non-zero on the
        entries that reach some state (``ν^T J_θ``)."""
        reach_theta = step_patterns(self)[1]
        return np.broadcast_to(reach_theta.any(axis=0), reach_theta.shape)

    def refine_claims(self, claims: Any) -> Any:
        for key, claim in list(claims.items()):
            claims[key] = dataclasses.replace(
                claim,
                kind="approximate",
                reason="UORO: an unbiased rank-1 random estimate of the RTRL influence (right "
                "on average over projection keys, noisy on one)",
                dropped=(),
                online=True,
                algorithm="uoro",
            )
        return claims
