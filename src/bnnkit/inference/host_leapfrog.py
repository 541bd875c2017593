"""HMC's leapfrog loop run from the host: one compiled leapfrog step of every chain per call.

XLA's CPU backend runs convolution gradients several times slower inside a compiled loop than
on their own (jax issue #12868; no XLA flag of jax 0.10.2 helps). So an HMC iteration can be
taken apart into three compiled pieces called from Python, the state staying on the device:

1. its start (:func:`trajectory_start`): the momentum, drawn from the iteration's key exactly
   as ``blackjax.hmc.build_kernel`` draws it, and every chain's number of leapfrog steps L —
   the only numbers that come back to the host;
2. one leapfrog step of every chain (:func:`leapfrog`), called max L times; a chain past its
   own L stays where it is, as vmapping BlackJAX's loop over chains of different L keeps it;
3. its end: the sampler's own iteration given the trajectory's end point (energy,
   accept/reject, adaptation).

With several chains this applies the in-loop iteration's operations in the same order and
gives the same bits. A single chain's leapfrog step is called unvmapped, which XLA:CPU runs
about 15 % faster for LeNet-5 than vmapped over an axis of one; XLA then sums the convolution
in another order, so it agrees with the in-loop iteration to rounding, not to the bit (a
resumed run takes the same path, so resume stays bit-exact).

:func:`build` gives what a method offers the run driver as ``Method.step_members``; the
``integrator`` setting picks the loop: ``"scan"`` (in the compiled iteration), ``"host"``, or
``"auto"`` (:func:`uses_host_loop`: host on the CPU backend for a log posterior with a
convolution).

Example:
    >>> import jax.numpy as jnp
    >>> uses_host_loop("auto", lambda p, b: jnp.sum(p ** 2), jnp.zeros(3), None)
    False
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from blackjax.mcmc.integrators import IntegratorState, velocity_verlet
from blackjax.mcmc.metrics import default_metric

from bnnkit.inference.adaptation import MEMBERS
from bnnkit.types import Batch, Key, Params

#: Where the leapfrog loop runs (``hmc.Config.integrator``).
INTEGRATORS = ("auto", "scan", "host")

#: ``(keys, states, batch) -> (states, infos)`` over chains stacked on a leading axis.
MemberStep = Callable[[Key, Any, Batch], tuple[Any, Any]]


def has_convolution(log_posterior: Callable, params: Params, batch: Batch) -> bool:
    """Whether ``log_posterior(params, batch)`` computes a convolution (traced, not run).

    Every convolutional and recurrent model in :mod:`bnnkit.models` (LeNet-5, the ResNets, the
    CNN-LSTM) has one, and no other model does.

    Example:
        >>> import jax.numpy as jnp
        >>> has_convolution(lambda p, b: jnp.sum(p ** 2), jnp.zeros(3), None)
        False
    """

    def convolves(jaxpr) -> bool:
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "conv_general_dilated":
                return True
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    inner = getattr(sub, "jaxpr", sub)  # a closed jaxpr holds its jaxpr
                    if hasattr(inner, "eqns") and convolves(inner):
                        return True
        return False

    return convolves(jax.make_jaxpr(log_posterior)(params, batch).jaxpr)


def uses_host_loop(integrator: str, log_posterior: Callable, params: Params, batch: Batch) -> bool:
    """Whether ``integrator`` (one of :data:`INTEGRATORS`) runs the leapfrog loop from the host
    for this problem.

    ``"auto"`` does on the CPU backend for a log posterior with a convolution: there one
    compiled leapfrog step per dispatch is faster (see the module); elsewhere the in-loop
    integrator saves the dispatches.

    Args:
        integrator: ``"auto"``, ``"scan"`` or ``"host"``.
        log_posterior: ``(params, batch) -> log density``.
        params, batch: one chain's position and the batch, or their shapes
            (``jax.ShapeDtypeStruct``).
    """
    if integrator != "auto":
        return integrator == "host"
    return jax.default_backend() == "cpu" and has_convolution(log_posterior, params, batch)


def trajectory_start(
    key: Key, state, *, num_steps: Callable[[Any], jax.Array]
) -> tuple[IntegratorState, jax.Array]:
    """The point (position, fresh momentum) an iteration's trajectory starts from and its number
    of leapfrog steps ``num_steps(state)``: what ``blackjax.hmc.build_kernel`` draws from
    ``key``.

    Args:
        key: the iteration's key.
        state: an HMC state (``position``, ``logdensity``, ``logdensity_grad``,
            ``inverse_mass_matrix``).
        num_steps: the iteration's number of leapfrog steps, from the state.
    """
    key_momentum, _ = jax.random.split(key)
    momentum = default_metric(state.inverse_mass_matrix).sample_momentum(
        key_momentum, state.position
    )
    point = IntegratorState(state.position, momentum, state.logdensity, state.logdensity_grad)
    return point, num_steps(state)


def leapfrog(
    point: IntegratorState,
    done: jax.Array,
    num_steps: jax.Array,
    step_size: jax.Array,
    inverse_mass: jax.Array,
    batch: Batch,
    *,
    log_posterior: Callable,
) -> IntegratorState:
    """Leapfrog step ``done + 1`` of a trajectory of ``num_steps``; past its end the point
    stays, as vmapping BlackJAX's loop over chains of different L keeps it."""
    moved = velocity_verlet(
        lambda p: log_posterior(p, batch), default_metric(inverse_mass).kinetic_energy
    )(point, step_size)
    return jax.tree.map(lambda m, p: jnp.where(done < num_steps, m, p), moved, point)


def host_step(
    keys: Key,
    states,
    batch: Batch,
    *,
    start: Callable,
    leapfrog_all: Callable,
    leapfrog_one: Callable,
    finish: Callable,
) -> tuple[Any, Any]:
    """Every chain's iteration with the leapfrog loop run from the host: one compiled leapfrog
    step of all chains per dispatch, everything on the device; only the chains' numbers of
    steps come to the host. The pieces are :func:`build`'s compiled ones."""
    point, num_steps = start(keys, states)
    steps = int(jnp.max(num_steps))
    if num_steps.shape[0] == 1:
        one, step_size, inverse_mass = jax.tree.map(
            lambda a: a[0], (point, states.step_size, states.inverse_mass_matrix)
        )
        for done in range(steps):
            one = leapfrog_one(one, done, num_steps[0], step_size, inverse_mass, batch)
        point = jax.tree.map(lambda a: a[None], one)
    else:
        for done in range(steps):
            point = leapfrog_all(
                point, done, num_steps, states.step_size, states.inverse_mass_matrix, batch
            )
    return finish(keys, states, batch, point)


def auto_step(
    keys: Key,
    states,
    batch: Batch,
    *,
    log_posterior: Callable,
    host: MemberStep,
    scan: MemberStep,
    chosen: dict,
) -> tuple[Any, Any]:
    """``host`` or ``scan`` as :func:`uses_host_loop` picks for these shapes of position and
    batch (decided once per shapes; ``chosen`` holds the decisions)."""
    # The signature from the leaves alone: it is computed every iteration, and building shape
    # structs of the whole state took milliseconds of an iteration that can take microseconds.
    leaves, tree = jax.tree.flatten((states.position, batch))
    signature = (tree, tuple((a.shape, a.dtype) for a in leaves))
    if signature not in chosen:
        one = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), states.position)
        shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), batch)
        chosen[signature] = uses_host_loop("auto", log_posterior, one, shapes)
    return (host if chosen[signature] else scan)(keys, states, batch)


def build(
    log_posterior: Callable,
    integrator: str,
    *,
    step: Callable,
    num_steps: Callable[[Any], jax.Array],
) -> MemberStep | None:
    """The chains' iteration for the run driver (``Method.step_members``), or ``None`` for
    ``"scan"`` (the driver then vmaps ``step`` itself).

    Args:
        log_posterior: ``(params, batch) -> log density``.
        integrator: one of :data:`INTEGRATORS`.
        step: ``(key, state, batch, trajectory_end=None) -> (state, info)``, the iteration of
            one chain: with ``trajectory_end`` (an ``IntegratorState``) the same iteration
            whose trajectory ends there, without it the in-loop one.
        num_steps: ``state -> L``, the iteration's number of leapfrog steps.
    """
    if integrator == "scan":
        return None
    host = functools.partial(
        host_step,
        start=jax.jit(
            jax.vmap(functools.partial(trajectory_start, num_steps=num_steps), axis_name=MEMBERS)
        ),
        # Not donating the point's buffers: its first is the state's own position (jit
        # forwards an input it returns unchanged), which the iteration's end still needs.
        leapfrog_all=jax.jit(
            jax.vmap(
                functools.partial(leapfrog, log_posterior=log_posterior),
                in_axes=(0, None, 0, 0, 0, None),
                axis_name=MEMBERS,
            )
        ),
        # One chain: its leapfrog step unvmapped. XLA:CPU runs a convolution's gradient
        # vmapped over an axis of one about 1.2x slower than the plain one (LeNet-5), and the
        # leapfrog step takes no collective over the chains.
        leapfrog_one=jax.jit(functools.partial(leapfrog, log_posterior=log_posterior)),
        finish=jax.jit(jax.vmap(step, in_axes=(0, 0, None, 0), axis_name=MEMBERS)),
    )
    if integrator == "host":
        return host
    scan = jax.jit(jax.vmap(step, in_axes=(0, 0, None), axis_name=MEMBERS))
    return functools.partial(
        auto_step, log_posterior=log_posterior, host=host, scan=scan, chosen={}
    )
