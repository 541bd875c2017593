"""The one interface every inference method implements.

A method is built from a log posterior and hyperparameters, then used as three pure functions::

    method = bnnkit.inference.hmc.build(log_posterior, step_size=1e-3, trajectory_len=0.1)
    state = method.init(key, params, batch)
    state, info = method.step(key, state, batch)     # jit-able; batch = full data for HMC
    posterior = method.posterior(kept_states)        # e.g. posterior.Samples

``State`` holds only what the next step needs; diagnostics go into ``Info``. Keys always come in
as arguments. ``init`` takes the batch too because methods that cache the log density and its
gradient (HMC) need data to evaluate them; methods that do not simply ignore it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

State = Any
Info = Any
Params = Any


class Method(NamedTuple):
    """An inference method as pure functions.

    Attributes:
        init: ``(key, params, batch) -> state``.
        step: ``(key, state, batch) -> (state, info)``; pure and jit-able.
        posterior: ``(kept_states) -> posterior`` where ``kept_states`` stacks states along a
            leading axis.
        position: ``(state) -> params``, the parameters a state stands for.
    """

    init: Callable[[jax.Array, Params, Any], State]
    step: Callable[[jax.Array, State, Any], tuple[State, Info]]
    posterior: Callable[[State], Any]
    position: Callable[[State], Params]
