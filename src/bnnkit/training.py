"""Run a minibatch method (SGD, deep ensembles, SGMCMC, VI) epoch by epoch into a run directory.

The loop is the minibatch counterpart of :mod:`bnnkit.chains`:

- the training set is put on the device once; each epoch draws a fresh permutation and runs
  ``num_train // batch_size`` minibatch steps in one ``lax.scan`` inside one jitted call (the
  last incomplete batch is dropped, as bnn_hmc does, so every step sees exactly ``batch_size``
  examples and the ``N/|B|`` scaling is exact);
- ``num_members`` independent members (ensemble members, or SGMCMC chains) run together,
  vmapped into the same compiled step (or one after the other with ``vmap_members=False``);
- member m's randomness at epoch e is ``fold_in(fold_in(root, m), e)`` (separate roots for the
  initialisation, the data order and the method's noise), a pure function of (seed, m, e), so a
  resumed run equals the uninterrupted run bit for bit;
- after epoch e (counted from 1), the members' positions are kept as a sample when
  ``e > burn_in_epochs`` and ``(e − burn_in_epochs) % ensemble_freq == 0`` (the default keeps
  only the last epoch: a point estimate per member); the full state is written every
  ``save_freq`` epochs and at the end; ``metrics.jsonl`` gets one line per epoch, with test
  metrics of the current positions every ``eval_freq`` epochs.

Run directories have the layout of :mod:`bnnkit.io`; ``run.json`` records ``"method"`` and
its configuration, so ``bnnkit evaluate`` works on every method alike.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import io, schedules
from bnnkit import problem as problem_lib
from bnnkit.errors import ConfigError
from bnnkit.inference import sgd, sgmcmc, vi
from bnnkit.inference.base import Method
from bnnkit.log_posterior import Batch
from bnnkit.models import num_params
from bnnkit.progress import ProgressBar

Params = Any


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How a minibatch method is run (bnn_hmc's flag names where they exist).

    Attributes:
        num_epochs: passes over the training data.
        batch_size: examples per minibatch step.
        num_members: independent members trained together (ensemble size / SGMCMC chains).
        burn_in_epochs: epochs before the first kept sample.
        ensemble_freq: keep a sample every this many epochs after the burn-in.
        eval_freq: log test metrics every this many epochs (0: never).
        save_freq: write the full state every this many epochs (and at the end).
        vmap_members: train members in one vmapped step (else one after another).
        seed: everything random derives from it.
    """

    num_epochs: int
    batch_size: int
    num_members: int = 1
    burn_in_epochs: int | None = None
    ensemble_freq: int = 1
    eval_freq: int = 0
    save_freq: int = 1
    vmap_members: bool = True
    seed: int = 0

    @property
    def burn_in(self) -> int:
        return self.num_epochs - 1 if self.burn_in_epochs is None else self.burn_in_epochs

    def kept_epochs(self) -> list[int]:
        """Epochs (counted from 1) after which the positions are kept as samples."""
        return [e for e in range(self.burn_in + 1, self.num_epochs + 1)
                if (e - self.burn_in) % self.ensemble_freq == 0]

    def validate(self, num_train: int) -> None:
        if self.num_epochs < 1:
            raise ConfigError(f"--num-epochs {self.num_epochs} must be >= 1")
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size {self.batch_size} must be >= 1")
        if self.batch_size > num_train:
            raise ConfigError(
                f"--batch-size {self.batch_size} is larger than the {num_train} training examples"
            )
        if self.num_members < 1:
            raise ConfigError(f"number of members {self.num_members} must be >= 1")
        if self.ensemble_freq < 1:
            raise ConfigError(f"--ensemble-freq {self.ensemble_freq} must be >= 1")
        if not 0 <= self.burn_in < self.num_epochs:
            raise ConfigError(
                f"--num-burnin-epochs {self.burn_in} must be >= 0 and smaller than --num-epochs "
                f"{self.num_epochs}"
            )
        if not self.kept_epochs():
            raise ConfigError(
                f"no sample would be kept: --ensemble-freq {self.ensemble_freq} is longer than "
                f"the {self.num_epochs - self.burn_in} epochs after the burn-in"
            )
        if self.eval_freq < 0:
            raise ConfigError(f"--eval-freq {self.eval_freq} must be >= 0")
        if self.save_freq < 1:
            raise ConfigError(f"--save-freq {self.save_freq} must be >= 1")

    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


# --- methods run by this loop -------------------------------------------------------------------

def _schedule(config: dict, steps_per_epoch: int, num_epochs: int):
    """The step-size schedule named in a method config, with lengths in epochs."""
    kind = config.get("schedule", "cosine")
    init = config["init_step_size"]
    if kind == "cosine":
        return schedules.cosine(init, num_epochs * steps_per_epoch)
    if kind == "constant":
        return schedules.constant_after_cosine_burnin(
            init, init if config.get("final_step_size") is None else config["final_step_size"],
            config.get("schedule_burn_in_epochs", 0) * steps_per_epoch,
        )
    if kind == "cyclical":
        cycle = config["cycle_length"]
        burn = config.get("schedule_burn_in_epochs", 0)
        if cycle < 1 or burn + cycle > num_epochs:
            raise ConfigError(
                f"--cycle-length {cycle} epochs (after a {burn}-epoch burn-in) does not fit in "
                f"--num-epochs {num_epochs}; allowed: 1..{max(num_epochs - burn, 0)}"
            )
        return schedules.cyclical_cosine(init, burn * steps_per_epoch, cycle * steps_per_epoch)
    raise ConfigError(f"unknown schedule {kind!r}; allowed: cosine, constant, cyclical")


def _build_sgd(problem, config: dict, steps_per_epoch: int, num_epochs: int) -> Method:
    return sgd.build(problem.log_posterior, _schedule(config, steps_per_epoch, num_epochs),
                     momentum_decay=config.get("momentum_decay", 0.9))


def _build_sgmcmc(problem, config: dict, steps_per_epoch: int, num_epochs: int) -> Method:
    return sgmcmc.build(
        problem.log_posterior, _schedule(config, steps_per_epoch, num_epochs),
        momentum_decay=config.get("momentum_decay", 0.0),
        preconditioner=config.get("preconditioner", "none"),
        rmsprop_decay=config.get("rmsprop_decay", 0.99),
        noise=config.get("noise", "gaussian"),
    )


#: ``name -> (problem, method_config, steps_per_epoch, num_epochs) -> Method``.
BUILDERS: dict[str, Callable[..., Method]] = {
    "sgd": _build_sgd,
    "ensemble": _build_sgd,
    "sgmcmc": _build_sgmcmc,
    "vi": vi.build_from_config,
}


# --- the pure epoch -----------------------------------------------------------------------------

def minibatch_indices(key: jax.Array, num_train: int, batch_size: int) -> jax.Array:
    """A random partition of ``range(num_train)`` into ``num_train // batch_size`` batches.

    Returns:
        ``(num_batches, batch_size)`` indices; the ``num_train % batch_size`` left over are
        dropped for this epoch.
    """
    num_batches = num_train // batch_size
    perm = jax.random.permutation(key, num_train)
    return perm[: num_batches * batch_size].reshape(num_batches, batch_size)


def make_epoch(method: Method, batch_size: int) -> Callable:
    """One member's epoch: ``(state, noise_key, data_key, epoch, train) -> (state, info)``.

    ``info`` is the method's per-step info averaged over the epoch. Pure and jit-able; vmap it
    over members.
    """

    def epoch_fn(state, noise_key, data_key, epoch, train: Batch):
        idx = minibatch_indices(jax.random.fold_in(data_key, epoch), train.x.shape[0],
                                batch_size)
        epoch_key = jax.random.fold_in(noise_key, epoch)

        def body(state, inputs):
            b, batch_idx = inputs
            batch = Batch(train.x[batch_idx], train.y[batch_idx])
            return method.step(jax.random.fold_in(epoch_key, b), state, batch)

        state, infos = jax.lax.scan(body, state, (jnp.arange(idx.shape[0]), idx))
        return state, jax.tree.map(lambda a: jnp.mean(a, axis=0), infos)

    return epoch_fn


# --- the run ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TrainResult:
    run_dir: io.RunDir
    num_epochs: int
    seconds: float
    seconds_per_epoch: float
    final_log: dict


def _check_resume(record: dict, method: str, problem_dict: dict, method_dict: dict,
                  train_dict: dict) -> None:
    if record.get("method") != method:
        raise ConfigError(f"cannot resume a {record.get('method')!r} run as {method!r}")
    io.check_same_settings(
        {**record["problem"], **record["method_config"], **record.get("train", {})},
        {**problem_dict, **method_dict, **train_dict},
    )


def run(
    problem_config: problem_lib.ProblemConfig,
    method: str,
    method_config: dict,
    train: TrainConfig,
    run_dir: str,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    on_epoch: Callable[[int, dict], None] | None = None,
    init_position: Callable[[jax.Array, int], Params] | None = None,
    extra_record: dict | None = None,
) -> TrainResult:
    """Train (or resume) ``method`` on ``problem_config`` into ``run_dir``.

    Args:
        problem_config: data, model, likelihood, prior, temperature.
        method: a key of :data:`BUILDERS` (``"sgd"``, ``"ensemble"``, ``"sgmcmc"``, ...).
        method_config: JSON-serialisable hyperparameters of the method (schedule included).
        train: epochs, batch size, members, what to keep.
        run_dir: the run directory.
        resume: continue the stored run (the config must be identical).
        overwrite: replace the stored run.
        progress: show a progress bar.
        on_epoch: called with (epoch, log record) after each epoch.
        init_position: ``(key, member) -> params`` instead of the model's initialiser (e.g.
            VI means from an SGD run).
        extra_record: more entries for ``run.json`` (e.g. ``{"posterior": ...}``).

    Returns:
        A :class:`TrainResult`.

    Example:
        >>> run(ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35), "sgd",
        ...     {"init_step_size": 1e-4, "momentum_decay": 0.9},
        ...     TrainConfig(num_epochs=100, batch_size=32), "runs/sgd")  # doctest: +SKIP
    """
    if method not in BUILDERS:
        raise ConfigError(f"unknown method {method!r}; allowed: {', '.join(sorted(BUILDERS))}")
    problem = problem_lib.build(problem_config)
    train.validate(problem.dataset.num_train)
    steps_per_epoch = problem.dataset.num_train // train.batch_size
    built = BUILDERS[method](problem, method_config, steps_per_epoch, train.num_epochs)

    rundir = io.RunDir(run_dir)
    problem_dict = dataclasses.asdict(problem_config)
    train_dict = dataclasses.asdict(train)
    if resume:
        rundir.prepare(resume=True, overwrite=False)
        _check_resume(io.read_json(rundir.run_file), method, problem_dict, method_config,
                      train_dict)
    else:
        rundir.prepare(resume=False, overwrite=overwrite)
    with rundir.lock():
        return _run_locked(problem, method, built, method_config, train, rundir, problem_dict,
                           train_dict, resume=resume, progress=progress, on_epoch=on_epoch,
                           init_position=init_position, extra_record=extra_record or {})


def _member_keys(root: jax.Array, stream: int, num_members: int) -> jax.Array:
    base = jax.random.fold_in(root, stream)
    return jax.vmap(lambda m: jax.random.fold_in(base, m))(jnp.arange(num_members))


def _run_locked(problem, method_name, method, method_config, train, rundir, problem_dict,
                train_dict, *, resume, progress, on_epoch, init_position, extra_record):
    train_batch = problem.train_batch()
    test_x = problem.dataset.x_test
    root = jax.random.PRNGKey(train.seed)
    init_keys = _member_keys(root, 0, train.num_members)
    noise_keys = _member_keys(root, 1, train.num_members)
    data_keys = _member_keys(root, 2, train.num_members)

    def init_all(keys):
        if init_position is None:
            params = jax.vmap(problem.init_params)(keys)
        else:
            params = jax.tree.map(
                lambda *a: jnp.stack(a),
                *[init_position(keys[m], m) for m in range(train.num_members)],
            )
        return jax.vmap(lambda k, p: method.init(k, p, None))(keys, params)

    epoch_fn = make_epoch(method, train.batch_size)
    if train.vmap_members:
        step_all = jax.jit(jax.vmap(epoch_fn, in_axes=(0, 0, 0, None, None)))
    else:
        one = jax.jit(epoch_fn)

        def step_all(state, nk, dk, epoch, batch):
            outs = [one(jax.tree.map(lambda a, m=m: a[m], state), nk[m], dk[m], epoch, batch)
                    for m in range(train.num_members)]
            return jax.tree.map(lambda *a: jnp.stack(a), *outs)

    if resume and rundir.state_file.is_file():
        template = jax.eval_shape(init_all, init_keys)
        stored = io.load_arrays(rundir.state_file)
        start = int(stored.pop("epoch"))
        state = jax.tree.map(jnp.asarray, io.unflatten_tree(template, stored))
        record = io.read_json(rundir.run_file)
    else:
        state = init_all(init_keys)
        start = 0
        record = {
            "method": method_name, "problem": problem_dict, "method_config": method_config,
            "train": train_dict, "posterior": "samples",
            "versions": io.versions(), "git": io.git_hash(), "started": io.now(),
            "num_params": num_params(jax.tree.map(lambda a: a[0], method.position(state))),
            "steps_per_epoch": problem.dataset.num_train // train.batch_size,
            "dataset": {"name": problem.dataset.name, "task": problem.dataset.task,
                        "num_train": problem.dataset.num_train,
                        "num_test": len(problem.dataset.x_test)},
            **extra_record,
        }
    # Anything written after the last checkpoint is recomputed identically from it.
    for it in rundir.sample_iterations():
        if it >= start:
            rundir.sample_file(it).unlink()
    rundir.truncate_log(start)
    record.update(status="running", resumed_at_epoch=start if resume else None)
    io.write_json(rundir.run_file, record)

    kept = set(train.kept_epochs())
    bar = ProgressBar(f"{method_name} epoch", train.num_epochs, start, enabled=progress)
    t0 = time.perf_counter()
    log: dict = {}
    try:
        for epoch in range(start, train.num_epochs):
            t_ep = time.perf_counter()
            state, info = step_all(state, noise_keys, data_keys, epoch, train_batch)
            info = jax.device_get(info)
            done = epoch + 1
            position = method.position(state)
            if done in kept:
                io.save_arrays(rundir.sample_file(epoch), io.flatten_tree(position))
            log = {"iteration": epoch, "epoch": done, "burn_in": done <= train.burn_in,
                   "seconds": time.perf_counter() - t_ep}
            for name, value in info._asdict().items():
                log[name] = np.asarray(value, float).tolist()
            if train.eval_freq and (done % train.eval_freq == 0 or done == train.num_epochs):
                log["test"] = _test_metrics(problem, position, test_x)
            rundir.append_log([log])
            if done % train.save_freq == 0 or done == train.num_epochs:
                io.save_arrays(rundir.state_file,
                               {**io.flatten_tree(state), "epoch": np.asarray(done)})
            bar.update(1, _epoch_stats(log))
            if on_epoch is not None:
                on_epoch(epoch, log)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    record.update(status="finished", finished=io.now())
    io.write_json(rundir.run_file, record)
    epochs_run = max(train.num_epochs - start, 1)
    return TrainResult(run_dir=rundir, num_epochs=train.num_epochs, seconds=seconds,
                       seconds_per_epoch=seconds / epochs_run, final_log=log)


def _test_metrics(problem, position: Params, x_test: np.ndarray) -> dict[str, float]:
    """Metrics of the members' current positions, ensembled, on the test set."""
    from bnnkit.evaluate import metrics_for
    from bnnkit.posterior import Samples
    from bnnkit.predict import predict

    samples = Samples(jax.tree.map(lambda a: a[:, None], position))
    prediction = predict(problem, samples, x_test, max_diagnostic_points=1)
    return metrics_for(prediction, problem.dataset.y_test_original)


def _epoch_stats(log: dict[str, Any]) -> str:
    parts = []
    for key in ("log_posterior", "elbo"):
        if key in log:
            parts.append(f"{key.replace('_', ' ')} {np.mean(log[key]):.4g}")
    if "step_size" in log:
        parts.append(f"step {np.mean(log['step_size']):.2e}")
    for key, value in log.get("test", {}).items():
        if key != "ece":
            parts.append(f"test {key} {value:.4g}")
    return " | ".join(parts)
