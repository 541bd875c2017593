"""Run HMC chains into a run directory: initialise, iterate, checkpoint, resume.

Chains run together: one jitted, vmapped ``step`` advances every chain by one HMC iteration
(the leapfrog loop is a ``lax.fori_loop`` inside it, so there is no Python work per leapfrog
step). The key of chain c at iteration i is ``fold_in(fold_in(chain_root, c), i)``, a pure
function of (seed, c, i), which is what makes ``--resume`` reproduce the uninterrupted chain
bit for bit.

On several devices (GPUs, TPU cores, or CPU devices simulated with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) the work is split with ``jax.sharding``:
chains across devices when their number divides evenly (``shard="chains"``), otherwise the
training examples across devices so that one chain's full-batch gradient is a sum over devices
(``shard="data"``, as the paper ran HMC on 8 GPUs). XLA inserts the cross-device sum; the code
is the same on one device or many.

After each iteration the kept sample (iterations >= num_burn_in) is written atomically, then the
log line, then (every ``checkpoint_every`` iterations and at the end) the full state. A crash
between those writes loses at most the iterations after the last state, which a resume
recomputes identically.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bnnkit import io
from bnnkit import problem as problem_lib
from bnnkit.errors import ConfigError
from bnnkit.inference import hmc
from bnnkit.models import num_params
from bnnkit.progress import ProgressBar


@dataclasses.dataclass(frozen=True)
class HMCConfig:
    """Hyperparameters of an HMC run (the paper's flag names).

    Attributes:
        step_size: initial leapfrog step size.
        trajectory_len: integration time; ``ceil(trajectory_len / step_size)`` leapfrog steps.
        num_iterations: total HMC iterations, burn-in included.
        num_burn_in: iterations whose samples are discarded (and where the step size adapts).
        num_chains: independent chains, run together.
        max_num_leapfrog_steps: refuse settings needing more leapfrog steps per iteration.
        target_accept_rate: the step-size adaptation's target.
        adapt_step_size: adapt during burn-in (then freeze).
        mh_during_burn_in: accept/reject during burn-in too.
        seed: everything random derives from it.
    """

    step_size: float
    trajectory_len: float
    num_iterations: int
    num_burn_in: int = 0
    num_chains: int = 1
    max_num_leapfrog_steps: int = 10_000
    target_accept_rate: float = 0.8
    adapt_step_size: bool = True
    mh_during_burn_in: bool = True
    seed: int = 0

    def validate(self) -> None:
        if self.num_iterations < 1:
            raise ConfigError(f"number of iterations {self.num_iterations} must be >= 1")
        if not 0 <= self.num_burn_in < self.num_iterations:
            raise ConfigError(
                f"burn-in {self.num_burn_in} must be >= 0 and smaller than the number of "
                f"iterations {self.num_iterations}"
            )
        if self.num_chains < 1:
            raise ConfigError(f"number of chains {self.num_chains} must be >= 1")

    @classmethod
    def from_dict(cls, values: dict) -> HMCConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


# Settings that may change on --resume: more iterations continue the same chains.
RESUMABLE_CHANGES = {"num_iterations"}
SHARD_MODES = ("auto", "chains", "data", "none")


def placement(shard: str, num_chains: int, num_data: int, devices=None):
    """Shardings for (chain-stacked state, training batch), or ``None`` for one device.

    Args:
        shard: ``"chains"``, ``"data"``, ``"none"`` or ``"auto"`` (chains if they divide evenly
            over the devices, else data if the examples do, else none).
        num_chains: chains run together.
        num_data: training examples.
        devices: defaults to ``jax.devices()``.

    Raises:
        ConfigError: an unknown mode, or a split that does not divide evenly.
    """
    if shard not in SHARD_MODES:
        raise ConfigError(f"unknown --shard {shard!r}; allowed: {', '.join(SHARD_MODES)}")
    devices = list(jax.devices() if devices is None else devices)
    n = len(devices)
    if shard == "none" or n == 1:
        return None
    if shard == "auto":
        shard = "chains" if num_chains % n == 0 else "data" if num_data % n == 0 else "none"
        if shard == "none":
            return None
    count = num_chains if shard == "chains" else num_data
    if count % n:
        raise ConfigError(f"--shard {shard}: {count} {shard} do not divide over {n} devices")
    mesh = Mesh(np.array(devices), ("d",))
    replicated = NamedSharding(mesh, PartitionSpec())
    split = NamedSharding(mesh, PartitionSpec("d"))
    if shard == "chains":
        return split, replicated
    return replicated, split


@dataclasses.dataclass(frozen=True)
class ChainsResult:
    run_dir: io.RunDir
    num_iterations: int
    acceptance_rate: float
    num_divergent: int
    step_size: np.ndarray
    seconds: float


def _check_resume(record: dict, problem_config: dict, method_config: dict) -> None:
    io.check_same_settings({**record["problem"], **record["method_config"]},
                           {**problem_config, **method_config}, RESUMABLE_CHANGES)


def run(
    problem_config: problem_lib.ProblemConfig,
    config: HMCConfig,
    run_dir: str,
    *,
    resume: bool = False,
    overwrite: bool = False,
    checkpoint_every: int = 1,
    progress: bool = True,
    on_iteration: Callable[[int, dict], None] | None = None,
    shard: str = "auto",
) -> ChainsResult:
    """Run (or resume) HMC chains for ``problem_config`` into ``run_dir``.

    Args:
        problem_config: data, model, likelihood, prior, temperature.
        config: HMC hyperparameters.
        run_dir: the run directory (created; an existing non-empty one needs ``resume`` or
            ``overwrite``).
        resume: continue the run stored in ``run_dir`` (only ``num_iterations`` may differ).
        overwrite: replace the run stored in ``run_dir``.
        checkpoint_every: write the full state every this many iterations (and at the end).
        progress: show a progress bar.
        on_iteration: called with (iteration, log record) after each iteration.
        shard: how to use several devices (see :func:`placement`); ignored on one device.

    Returns:
        A :class:`ChainsResult` summary of the post-burn-in iterations.

    Example:
        >>> run(ProblemConfig("yacht_0", "mlp_regression_small"),
        ...     HMCConfig(step_size=1e-4, trajectory_len=0.01, num_iterations=20, num_burn_in=10,
        ...               num_chains=2), "runs/yacht")  # doctest: +SKIP
    """
    config.validate()
    if shard not in SHARD_MODES:
        raise ConfigError(f"unknown --shard {shard!r}; allowed: {', '.join(SHARD_MODES)}")
    if checkpoint_every < 1:
        raise ConfigError(f"checkpoint interval {checkpoint_every} must be >= 1")
    problem = problem_lib.build(problem_config)
    method = hmc.build(
        problem.log_posterior,
        step_size=config.step_size,
        trajectory_len=config.trajectory_len,
        num_burn_in=config.num_burn_in,
        adapt_step_size=config.adapt_step_size,
        target_accept_rate=config.target_accept_rate,
        max_num_leapfrog_steps=config.max_num_leapfrog_steps,
        mh_during_burn_in=config.mh_during_burn_in,
    )
    rundir = io.RunDir(run_dir)
    problem_dict = dataclasses.asdict(problem_config)
    method_dict = dataclasses.asdict(config)
    if resume:
        rundir.prepare(resume=True, overwrite=False)
        record = io.read_json(rundir.run_file)
        if record.get("method") != "hmc":
            raise ConfigError(
                f"cannot resume {run_dir!r} with hmc: it holds a {record.get('method')!r} run"
            )
        _check_resume(record, problem_dict, method_dict)
    else:
        rundir.prepare(resume=False, overwrite=overwrite)

    with rundir.lock():
        return _run_locked(
            problem, method, config, rundir, problem_dict, method_dict,
            resume=resume, checkpoint_every=checkpoint_every, progress=progress,
            on_iteration=on_iteration, shard=shard,
        )


def _run_locked(problem, method, config, rundir, problem_dict, method_dict, *, resume,
                checkpoint_every, progress, on_iteration, shard) -> ChainsResult:
    batch = problem.train_batch()
    shardings = placement(shard, config.num_chains, problem.dataset.num_train)
    if shardings is not None:
        batch = jax.device_put(batch, shardings[1])
    root = jax.random.PRNGKey(config.seed)
    chain_ids = jnp.arange(config.num_chains)
    init_keys = jax.vmap(lambda c: jax.random.fold_in(jax.random.fold_in(root, 0), c))(chain_ids)
    chain_keys = jax.vmap(lambda c: jax.random.fold_in(jax.random.fold_in(root, 1), c))(
        chain_ids
    )

    def init_all(keys, batch):
        params = jax.vmap(problem.init_params)(keys)
        return jax.vmap(method.init, in_axes=(0, 0, None))(keys, params, batch)

    @jax.jit
    def step_all(state, batch):
        keys = jax.vmap(lambda k, it: jax.random.fold_in(k, it))(chain_keys, state.iteration)
        return jax.vmap(method.step, in_axes=(0, 0, None))(keys, state, batch)

    if resume and rundir.state_file.is_file():
        template = jax.eval_shape(init_all, init_keys, batch)
        state = jax.tree.map(jnp.asarray, io.unflatten_tree(
            template, io.load_arrays(rundir.state_file)
        ))
        start = int(np.asarray(state.iteration)[0])
        record = io.read_json(rundir.run_file)
        record["method_config"] = method_dict
    else:
        state = jax.jit(init_all)(init_keys, batch)
        start = 0
        record = {
            "method": "hmc", "problem": problem_dict, "method_config": method_dict,
            "versions": io.versions(), "git": io.git_hash(), "started": io.now(),
            "num_params": num_params(jax.tree.map(lambda a: a[0], state.position)),
            "dataset": {"name": problem.dataset.name, "task": problem.dataset.task,
                        "num_train": problem.dataset.num_train,
                        "num_test": len(problem.dataset.x_test),
                        **{k: v for k, v in problem.dataset.info.items()
                           if isinstance(v, (str, int, float))}},
        }
    if shardings is not None:
        state = jax.device_put(state, shardings[0])
    # Anything written after the last checkpoint is recomputed identically from it.
    for it in rundir.sample_iterations():
        if it >= start:
            rundir.sample_file(it).unlink()
    rundir.truncate_log(start)
    record.update(status="running", resumed_at_iteration=start if resume else None)
    io.write_json(rundir.run_file, record)

    t0 = time.perf_counter()
    bar = ProgressBar("HMC", config.num_iterations, start, enabled=progress)
    divergences = 0
    try:
        for it in range(start, config.num_iterations):
            t_it = time.perf_counter()
            state, info = step_all(state, batch)
            info = jax.device_get(info)
            if it >= config.num_burn_in:
                io.save_arrays(rundir.sample_file(it), io.flatten_tree(state.position))
            log = {
                "iteration": it,
                "burn_in": it < config.num_burn_in,
                "acceptance_rate": np.asarray(info.acceptance_rate, float).tolist(),
                "accepted": np.asarray(info.is_accepted, bool).tolist(),
                "divergent": np.asarray(info.is_divergent, bool).tolist(),
                "step_size": np.asarray(info.step_size, float).tolist(),
                "num_leapfrog": np.asarray(info.num_leapfrog, int).tolist(),
                "log_posterior": np.asarray(info.logdensity, float).tolist(),
                "seconds": time.perf_counter() - t_it,
            }
            rundir.append_log([log])
            if (it + 1) % checkpoint_every == 0 or it + 1 == config.num_iterations:
                io.save_arrays(rundir.state_file, io.flatten_tree(state))
            divergences += sum(log["divergent"])
            bar.update(1, _hmc_stats(log, divergences))
            if on_iteration is not None:
                on_iteration(it, log)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0

    record.update(status="finished", finished=io.now())
    io.write_json(rundir.run_file, record)
    kept = [r for r in rundir.read_log() if not r["burn_in"]]
    return ChainsResult(
        run_dir=rundir,
        num_iterations=config.num_iterations,
        acceptance_rate=float(np.mean([r["acceptance_rate"] for r in kept])) if kept else
        float("nan"),
        num_divergent=int(sum(sum(r["divergent"]) for r in kept)),
        step_size=np.asarray(state.step_size),
        seconds=seconds,
    )


def _hmc_stats(log: dict[str, Any], divergences: int) -> str:
    phase = "burn-in" if log["burn_in"] else "sampling"
    return (
        f"{phase} | accept {np.mean(log['acceptance_rate']):.2f} | "
        f"step {np.mean(log['step_size']):.2e} | L {max(log['num_leapfrog'])} | "
        f"log post {np.mean(log['log_posterior']):.1f} | div {divergences}"
    )
