"""The chains :func:`bnnkit.runs.sample` returns, with their verdict and sampler warnings.

Whether the chains come from memory, from a run directory being written or from one read back
(:func:`bnnkit.runs.load_chains`), they are judged the same way: the convergence verdict of
:mod:`bnnkit.metrics.convergence` on the positions themselves (for an identifiable target the
parameters are the quantities of interest), and the driver's stuck-or-unstable warning from a
:class:`~bnnkit.runs.tally.SamplerTally` of every iteration's info, in the words of the Python
API.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit.inference.base import Loop
from bnnkit.metrics import convergence
from bnnkit.metrics.vocabulary import PARAMETERS_PYTHON
from bnnkit.runs.tally import SamplerTally
from bnnkit.types import Params


class Chains(NamedTuple):
    """What :func:`bnnkit.runs.sample` returns.

    Attributes:
        positions: the kept positions, every leaf shaped (chains, samples, ...).
        info: the sampler's info of every iteration, burn-in included, (chains, iterations).
        state: the final sampler state of every chain (adapted step size, mass matrix, ...).
        convergence: the verdict on the positions (see :mod:`bnnkit.metrics.convergence`).
        warnings: what a user should act on: a stuck or unstable sampler after burn-in (the
            driver's warning, :class:`bnnkit.runs.tally.SamplerTally`), already shown
            when progress was.
    """

    positions: Params
    info: Any
    state: Any
    convergence: dict[str, Any]
    warnings: tuple[str, ...] = ()

    def summary(self):
        """Per-parameter diagnostics of the kept positions: mean, sd, quantiles, MCSE, bulk and
        tail ESS and rank-normalised R-hat (:func:`bnnkit.metrics.mcmc_summary.summary`)."""
        from bnnkit.metrics.mcmc_summary import summary

        return summary(self.positions)


def chains_of(kept: Params, info: Any, state: Any, loop: Loop, method: str | None = None) -> Chains:
    """The :class:`Chains` of the kept positions and every iteration's info (chains first),
    with the verdict and the sampler warnings (``method``'s advice) computed from them."""
    draws = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(kept)
    after = jax.tree.map(lambda x: np.asarray(x)[:, loop.burn_in :], info)
    trace = getattr(after, "log_posterior", None)
    verdict = (
        convergence.verdict(
            np.asarray(draws),
            acceptance_rate=float(np.mean(after.acceptance_rate)),
            num_divergent=int(np.sum(after.divergent)),
            log_posterior=None if trace is None else np.asarray(trace),
            vocabulary=PARAMETERS_PYTHON,
        )
        if draws.shape[1] >= 4
        else {
            "converged": False,
            "level": "not-mixed",
            "problems": ["fewer than 4 kept samples per chain"],
            "advice": ["run more iterations after burn-in (a larger num_iterations)"],
        }
    )
    tally = SamplerTally(loop, method, PARAMETERS_PYTHON)
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
