"""Sample any log density over a pytree with bnnkit's full-batch samplers, in memory.

:func:`sample` is the run driver's multi-chain loop without a dataset, a model or a run
directory: the chains of a full-batch sampler (``hmc`` or ``nuts``, with every adaptation mode)
advance together under one ``jax.vmap`` (named :data:`~bnnkit.inference.adaptation.MEMBERS`,
so ChEES can pool across chains) inside one compiled ``lax.scan``. Keys follow the driver's
scheme: chain m's key at iteration u is ``fold_in(fold_in(fold_in(key(seed), 1), m), u)``.

The result carries the kept positions, every iteration's sampler info and the convergence
verdict of :mod:`bnnkit.metrics.convergence` on the positions themselves (for an identifiable
target the parameters are the quantities of interest; for a network use the run driver, whose
verdict is in function space).

Example (a hierarchical normal model, the eight schools, non-centred):
    >>> import jax.numpy as jnp
    >>> from bnnkit.inference import hmc
    >>> y = jnp.array([28., 8., -3., 7., -1., 1., 18., 12.])
    >>> sigma = jnp.array([15., 10., 16., 11., 9., 11., 10., 18.])
    >>> def log_density(p):
    ...     tau = jnp.exp(p["log_tau"])
    ...     theta = p["mu"] + tau * p["z"]
    ...     return (-0.5 * jnp.sum(((y - theta) / sigma) ** 2) - 0.5 * jnp.sum(p["z"] ** 2)
    ...             - 0.5 * (p["mu"] / 5) ** 2 - 0.5 * (tau / 5) ** 2 + p["log_tau"])
    >>> config = hmc.Config(step_size=0.1, trajectory_len=3.0, adapt="mass", num_chains=4,
    ...                     num_iterations=600, num_burn_in=300)
    >>> start = {"mu": jnp.zeros(4), "log_tau": jnp.zeros(4), "z": jnp.zeros((4, 8))}
    >>> chains = sample(log_density, start, config)
    >>> chains.positions["z"].shape  # (chains, kept samples, ...)
    (4, 300, 8)
    >>> chains.convergence["converged"], chains.convergence["problems"]
    (True, [])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from bnnkit.errors import ConfigError
from bnnkit.inference import METHODS
from bnnkit.inference.adaptation import MEMBERS
from bnnkit.inference.base import RunSettings
from bnnkit.metrics import convergence
from bnnkit.runs.loop import INIT_STREAM, NOISE_STREAM, member_keys
from bnnkit.types import Params


class Chains(NamedTuple):
    """What :func:`sample` returns.

    Attributes:
        positions: the kept positions, every leaf shaped (chains, samples, ...).
        info: the sampler's info of every iteration, burn-in included, (chains, iterations).
        state: the final sampler state of every chain (adapted step size, mass matrix, ...).
        convergence: the verdict on the positions (see :mod:`bnnkit.metrics.convergence`).
    """

    positions: Params
    info: Any
    state: Any
    convergence: dict[str, Any]


def sample(log_density: Callable[[Params], jax.Array], initial_positions: Params,
           config: RunSettings) -> Chains:
    """Run ``config.num_chains`` chains of a full-batch sampler on ``log_density``.

    Args:
        log_density: position -> log density (unnormalised), differentiable by JAX.
        initial_positions: one starting position per chain: a pytree whose leaves have a
            leading axis of length ``config.num_chains``.
        config: a full-batch sampler's Config (:class:`bnnkit.inference.hmc.Config` or
            :class:`bnnkit.inference.nuts.Config`); its seed, iterations, burn-in, chains and
            adaptation are used.

    Returns:
        :class:`Chains`.

    Raises:
        ConfigError: a Config of a minibatch method, or starting positions whose leading axis
            is not the number of chains.
    """
    module = METHODS.get(config.METHOD)
    loop = config.loop(1)
    if module is None or loop.kind != "iterations":
        raise ConfigError(f"sample() runs full-batch samplers (hmc, nuts), not "
                          f"{config.METHOD!r}")
    leaves = jax.tree.leaves(initial_positions)
    if not leaves or any(jnp.ndim(leaf) < 1 or jnp.shape(leaf)[0] != loop.num_members
                         for leaf in leaves):
        raise ConfigError(f"initial positions need a leading axis of length --num-chains "
                          f"{loop.num_members} on every leaf, got shapes "
                          f"{[jnp.shape(leaf) for leaf in leaves]}")
    method = module.build(lambda params, batch: log_density(params), config)
    init_keys = member_keys(config.seed, INIT_STREAM, loop.num_members)
    noise_keys = member_keys(config.seed, NOISE_STREAM, loop.num_members)

    @jax.jit
    def run_all(initial_positions):
        state = jax.vmap(lambda k, p: method.init(k, p, None), axis_name=MEMBERS)(
            init_keys, initial_positions)
        step = jax.vmap(method.step, in_axes=(0, 0, None), axis_name=MEMBERS)

        def body(state, unit):
            keys = jax.vmap(lambda k: jax.random.fold_in(k, unit))(noise_keys)
            state, info = step(keys, state, None)
            return state, (method.position(state), info)

        state, (positions, info) = jax.lax.scan(body, state, jnp.arange(loop.num_units))
        # scan stacks iterations first: put chains first, as everywhere else.
        positions, info = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), (positions, info))
        kept = jax.tree.map(lambda x: x[:, loop.burn_in:], positions)
        return kept, info, state

    kept, info, state = run_all(initial_positions)
    draws = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(kept)
    after = jax.tree.map(lambda x: np.asarray(x)[:, loop.burn_in:], info)
    verdict = (convergence.verdict(np.asarray(draws),
                                   acceptance_rate=float(np.mean(after.acceptance_rate)),
                                   num_divergent=int(np.sum(after.divergent)))
               if draws.shape[1] >= 4 else
               {"converged": False, "problems": ["fewer than 4 kept samples per chain"],
                "advice": ["run more iterations after burn-in"]})
    return Chains(kept, info, state, verdict)
