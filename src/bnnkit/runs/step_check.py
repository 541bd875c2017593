r"""Level 0 of unadjusted MCLMC measured: the chains continued at half their step.

Unadjusted MCLMC has no Metropolis step, so its draws follow a distribution some way from the
posterior that shrinks with the step, :math:`O(\varepsilon^2)`
(:mod:`bnnkit.inference.mclmc`). Counting the steps whose energy error spikes says where the
integration was poor, not how far the model average moved. This measures it, as BlackJAX's
documentation advises for an unadjusted sampler: every chain is continued from its last
state, with its tuned ``L`` and preconditioner, for a quarter of its kept draws
(:data:`SEGMENT_SHARE`), three times with noise of their own: once at :math:`\varepsilon/2`
with twice the steps per draw (the same integration time per draw) and twice at
:math:`\varepsilon`, whose distance is the Monte Carlo floor of segments of that length from
that state. Level 0 (:func:`bnnkit.metrics.numerics.step_bias`) reads the half-step segment's
distance to the others beyond that floor against the run's own halves' distance (level 2's):
a bias within it does not move what the run can resolve.

The continuation runs only where it decides the verdict (:func:`decides`): when every other
level passes and level 0 did not fail on a bulk above its target or cut-off steps, that is
between "certified" and "reproducible". It is drawn from a key of its own
(:func:`segment_key`), so an evaluation repeated on the same devices gives the same figures,
and it writes nothing into the run: its figures are stored with the verdict.

Example:
    >>> segment_draws(200), segment_draws(3)
    (50, 1)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from bnnkit import problem as problem_lib
from bnnkit.inference import mclmc
from bnnkit.metrics.levels import Verdict
from bnnkit.metrics.numerics import HalfStep
from bnnkit.posterior.samples import Samples
from bnnkit.predict import predict
from bnnkit.runs import lifecycle, manifest
from bnnkit.runs.directory import RunDir
from bnnkit.runs.keys import evaluation_key
from bnnkit.runs.prepare import member_init

#: The continuation is this share of the run's kept draws per chain (at least one).
SEGMENT_SHARE = 4
#: The substream of the run's evaluation stream that drives the continuation's noise.
SEGMENT_STREAM = 1


def segment_draws(kept: int) -> int:
    """Draws per chain of the continuation, for ``kept`` kept draws per chain."""
    return max(1, kept // SEGMENT_SHARE)


def applies(record: dict) -> bool:
    """Whether a stored run is unadjusted MCLMC, whose level 0 this measures."""
    config = record.get("method_config") or {}
    return record.get("method") == "mclmc" and not config.get("adjusted")


def decides(found: Verdict) -> bool:
    """Whether the continuation can change ``found``: level 0 passed or failed softly (on
    spikes) and every other level passed."""
    numerics = found.findings.get("L0")
    if numerics is None or (not numerics.passed and not numerics.soft):
        return False
    return all(each.passed for name, each in found.findings.items() if name != "L0")


def segment_key(seed: int) -> jax.Array:
    """The continuation's key: a substream of the run's evaluation stream."""
    return jax.random.fold_in(evaluation_key(seed), SEGMENT_STREAM)


def _config(record: dict) -> mclmc.Config:
    """The run's sampler settings as it recorded them, its start dropped (the continuation
    starts from the run's own last state)."""
    fields = {f.name for f in dataclasses.fields(mclmc.Config)}
    given = {k: v for k, v in (record.get("method_config") or {}).items() if k in fields}
    return mclmc.Config(**{**given, "init_checkpoint": None, "until": None, "max_time": None})


def segment(method: Any, state: Any, batch: Any, key: jax.Array, draws: int) -> Any:
    """``draws`` iterations of every chain of ``state`` (stacked over chains) under
    ``method``; the draws, every leaf (chains, draws, ...)."""
    step = jax.vmap(method.step, in_axes=(0, 0, None))
    chains = state.step_size.shape[0]

    def body(carry, k):
        carry, _ = step(jax.random.split(k, chains), carry, batch)
        return carry, method.position(carry)

    _, positions = jax.lax.scan(body, state, jax.random.split(key, draws))
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), positions)


def continuation(
    run_dir: RunDir, record: dict, problem: problem_lib.Problem, x: Any
) -> HalfStep | None:
    """Every chain of a stored unadjusted MCLMC run continued from its last state at half its
    step and twice at its step, each predicted at ``x``; ``None`` where the stored state is
    not the one after the run's last kept draw (a stopped run, a run without its state).

    Args:
        run_dir: the run.
        record: its ``run.json``.
        problem: its problem, built.
        x: the test inputs.

    Raises:
        ConfigError: a damaged state.
    """
    config = _config(record)
    found = manifest.check(run_dir, record)
    if not run_dir.state_file.is_file() or found.state_unit != config.num_iterations:
        return None
    batch = problem.train_batch()
    ran = mclmc.build(problem.log_posterior, config)
    keys = jax.random.split(jax.random.PRNGKey(0), config.num_chains)
    template = jax.eval_shape(member_init(ran, jax.vmap(problem.init_params)), keys, batch)
    _, state = lifecycle.load_state(run_dir, template, found.state_sha256)
    steps = config.steps_per_iteration
    halved = mclmc.build(
        problem.log_posterior, dataclasses.replace(config, steps_per_iteration=2 * steps)
    )
    draws = segment_draws(config.num_iterations - config.num_burn_in)
    key = segment_key(config.seed)
    at_step = jax.jit(lambda s, b, k: segment(ran, s, b, k, draws))
    at_half = jax.jit(lambda s, b, k: segment(halved, s, b, k, draws))
    half_state = state._replace(step_size=state.step_size / 2)
    segments = [
        predict(problem, Samples(positions), x)
        for positions in (
            at_half(half_state, batch, jax.random.fold_in(key, 0)),
            at_step(state, batch, jax.random.fold_in(key, 1)),
            at_step(state, batch, jax.random.fold_in(key, 2)),
        )
    ]
    per_step = mclmc.GRADIENTS_PER_STEP * steps
    return HalfStep(
        *segments,
        gradients=config.num_chains * draws * 4 * per_step,
        chain_gradients=config.num_chains * config.num_iterations * per_step,
    )
