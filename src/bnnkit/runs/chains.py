"""The chains :func:`bnnkit.runs.sample` returns, with their verdict and sampler warnings.

Whether the chains come from memory, from a run directory being written or from one read back
(:func:`bnnkit.runs.load_chains`), they are judged the same way: by the levels of the verdict
(:mod:`bnnkit.metrics.levels`) that a log density without test data has, level 0 (numerics)
on the sampler's info and level 1 (stationary chains) on the positions themselves (for an
identifiable target the parameters are the quantities of interest) with their log density as
the slow functional; and by the driver's stuck-or-unstable warning from a
:class:`~bnnkit.runs.tally.SamplerTally` of every iteration's info, in the words of the Python
API.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit.inference.base import Loop
from bnnkit.metrics import levels
from bnnkit.metrics.findings import python_name
from bnnkit.metrics.mcmc_summary import summary
from bnnkit.metrics.numerics import numerics
from bnnkit.metrics.stationarity import stationarity
from bnnkit.runs.tally import SamplerTally
from bnnkit.types import Params


class Chains(NamedTuple):
    """What :func:`bnnkit.runs.sample` returns.

    Attributes:
        positions: the kept positions, every leaf shaped (chains, samples, ...).
        info: the sampler's info of every iteration, burn-in included, (chains, iterations).
        state: the final sampler state of every chain (adapted step size, mass matrix, ...).
        verdict: the verdict on the positions, levels 0 and 1
            (:class:`bnnkit.metrics.levels.Verdict`).
        warnings: what a user should act on: a stuck or unstable sampler after burn-in (the
            driver's warning, :class:`bnnkit.runs.tally.SamplerTally`), already shown
            when progress was.
    """

    positions: Params
    info: Any
    state: Any
    verdict: levels.Verdict
    warnings: tuple[str, ...] = ()

    @property
    def convergence(self) -> dict[str, Any]:
        """The verdict as a dict (:meth:`bnnkit.metrics.levels.Verdict.to_dict`), with
        ``converged``: whether every level judged passed."""
        return {**self.verdict.to_dict(), "converged": not self.verdict.failed}

    def summary(self):
        """Per-parameter diagnostics of the kept positions: mean, sd, quantiles, MCSE, bulk and
        tail ESS and rank-normalised R-hat (:func:`bnnkit.metrics.mcmc_summary.summary`)."""
        return summary(self.positions)


def chains_of(kept: Params, info: Any, state: Any, loop: Loop, method: str | None = None) -> Chains:
    """The :class:`Chains` of the kept positions and every iteration's info (chains first),
    with the verdict and the sampler warnings (``method``'s advice) computed from them."""
    draws = np.asarray(jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(kept))
    after = jax.tree.map(lambda x: np.asarray(x)[:, loop.burn_in :], info)
    lines = [
        {
            "divergent": after.divergent[:, i].tolist(),
            "acceptance_rate": after.acceptance_rate[:, i],
        }
        for i in range(after.divergent.shape[1])
    ]
    trace = getattr(after, "log_posterior", None)
    traces = {} if trace is None else {"log posterior": np.asarray(trace, np.float64)}
    verdict = levels.verdict(
        {
            "L0": numerics(lines, method, {}),
            "L1": stationarity(draws, functionals=traces, quantities="parameters"),
        }
    )
    tally = SamplerTally(loop, method, python_name)
    tally_chunk(tally, 0, info, loop)
    warning = tally.warning()
    return Chains(kept, info, state, verdict, () if warning is None else (warning,))


def tally_chunk(tally: SamplerTally, first: int, info: Any, loop: Loop) -> None:
    """Count iterations ``first, first + 1, ...`` of ``info`` (chains first) in ``tally``."""
    accepted, divergent = np.asarray(info.acceptance_rate), np.asarray(info.divergent)
    capped = getattr(info, "capped", None)
    for i in range(accepted.shape[1]):
        tally.add(
            {
                "burn_in": first + i < loop.burn_in,
                "acceptance_rate": accepted[:, i],
                "divergent": divergent[:, i],
                **({} if capped is None else {"capped": np.asarray(capped)[:, i]}),
            }
        )
