"""``bnnkit vi``: mean-field variational inference, Bayes by Backprop (Blundell et al. 2015).

The paper's MFVI (Izmailov et al. 2021) starts the means at an SGD solution::

    bnnkit sgd --dataset yacht_0 --model mlp_regression_small --noise-std 0.35 \\
        --init-step-size 1e-5 --num-epochs 500 --batch-size 32 --dir runs/sgd
    bnnkit vi  --dataset yacht_0 --model mlp_regression_small --noise-std 0.35 \\
        --init-step-size 1e-3 --num-epochs 500 --batch-size 32 --mean-init-run runs/sgd \\
        --dir runs/vi --reference runs/hmc
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bnnkit.commands.common import add_problem_arguments
from bnnkit.commands.training_args import (
    add_epoch_arguments,
    add_run_dir_arguments,
    train_config,
)
from bnnkit.errors import ConfigError

#: Methods whose runs hold point estimates a VI mean can start from.
MEAN_INIT_METHODS = ("sgd", "ensemble")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_arguments(p)
    add_epoch_arguments(p)
    g = p.add_argument_group("variational inference")
    g.add_argument("--optimizer", default="adam", type=str.lower,
                   help="adam or sgd (with --momentum-decay); the step size follows a cosine "
                        "schedule from --init-step-size to 0")
    g.add_argument("--momentum-decay", type=float, default=0.9,
                   help="heavy-ball momentum β in [0, 1) of --optimizer sgd")
    g.add_argument("--vi-num-samples", type=int, default=1,
                   help="reparameterised Monte Carlo samples of the weights per step")
    g.add_argument("--vi-sigma-init", type=float, default=1e-3,
                   help="initial posterior std σ of every weight (σ = softplus(ρ))")
    g.add_argument("--kl-weighting", default="uniform", type=str.lower,
                   help="share of the KL per minibatch i of M: uniform (1/M) or blundell "
                        "(2^(M-i)/(2^M-1))")
    g.add_argument("--vi-ensemble-size", type=int, default=20,
                   help="weight samples drawn from q for the predictive at evaluation")
    g.add_argument("--mean-init-run", default=None,
                   help="finished sgd/ensemble run directory (same model and data) whose final "
                        "parameters initialise the means")
    add_run_dir_arguments(p)


def method_config(args: argparse.Namespace) -> dict:
    if args.vi_ensemble_size < 1:
        raise ConfigError(f"--vi-ensemble-size {args.vi_ensemble_size} must be >= 1")
    config = {"schedule": "cosine", "init_step_size": args.init_step_size,
              "optimizer": args.optimizer, "num_samples": args.vi_num_samples,
              "sigma_init": args.vi_sigma_init, "kl_weighting": args.kl_weighting,
              "vi_ensemble_size": args.vi_ensemble_size}
    if args.optimizer == "sgd":
        config["momentum_decay"] = args.momentum_decay
    if args.mean_init_run is not None:
        config["mean_init_run"] = os.path.abspath(args.mean_init_run)
    return config


def mean_init_position(run_dir: str | os.PathLike, problem_config) -> Callable[[Any, int], Any]:
    """``(key, member) -> params``: the final parameters of a finished SGD or ensemble run.

    Member m starts from the stored run's member ``m mod K``; the key is unused.

    Raises:
        ConfigError: the directory is missing or not a run, the run is unfinished, of another
            method, or for another model, dataset or output layer.

    Example:
        >>> init = mean_init_position("runs/sgd", ProblemConfig("yacht_0", "mlp_regression_small",
        ...                                                     noise_std=0.35))  # doctest: +SKIP
        >>> training.run(..., init_position=init)  # doctest: +SKIP
    """
    import jax
    import jax.numpy as jnp

    from bnnkit import io
    from bnnkit import problem as problem_lib
    from bnnkit.evaluate import load_run

    flag = f"--mean-init-run {str(run_dir)!r}"
    rundir = io.RunDir(run_dir)
    if not rundir.run_file.is_file():
        raise ConfigError(f"{flag} is not a bnnkit run directory (no run.json); allowed: a "
                          f"finished {' or '.join(MEAN_INIT_METHODS)} run")
    record = io.read_json(rundir.run_file)
    if record.get("method") not in MEAN_INIT_METHODS:
        raise ConfigError(f"{flag} is a {record.get('method')!r} run; allowed: a finished "
                          f"{' or '.join(MEAN_INIT_METHODS)} run")
    if record.get("status") != "finished":
        raise ConfigError(f"{flag} is unfinished (status {record.get('status')!r}); allowed: a "
                          "finished run (complete it with --resume)")
    mine = dataclasses.asdict(problem_config)
    for key in ("model", "dataset"):
        if record["problem"].get(key) != mine[key]:
            raise ConfigError(
                f"{flag} is for {key} {record['problem'].get(key)!r}, not {mine[key]!r}; "
                f"allowed: a run with the same model and dataset"
            )
    _, _, samples = load_run(run_dir)
    problem = problem_lib.build(problem_config)
    template = jax.eval_shape(problem.init_params, jax.random.PRNGKey(0))
    stored = jax.tree.map(lambda a: a[0, -1], samples.params)
    for t, s in zip(jax.tree.leaves(template), jax.tree.leaves(stored), strict=True):
        if tuple(t.shape) != tuple(s.shape):
            raise ConfigError(
                f"{flag} has parameters of shape {tuple(s.shape)} where this model has "
                f"{tuple(t.shape)} (another likelihood or noise setting); allowed: a run with "
                "the same network outputs"
            )
    dtype = jax.tree.leaves(template)[0].dtype
    finals = jax.tree.map(lambda a: jnp.asarray(a[:, -1], dtype), samples.params)
    num_stored = samples.num_chains

    def init_position(key, m: int):
        del key
        return jax.tree.map(lambda a: a[m % num_stored], finals)

    return init_position


def run(args: argparse.Namespace) -> int:
    from bnnkit import training
    from bnnkit.commands.common import problem_config
    from bnnkit.evaluate import evaluate
    from bnnkit.report.tables import print_table

    config = method_config(args)
    problem = problem_config(args)
    init = None
    if args.mean_init_run is not None:
        if not Path(args.mean_init_run).is_dir():
            raise ConfigError(f"--mean-init-run {args.mean_init_run!r} does not exist; allowed: "
                              f"a finished {' or '.join(MEAN_INIT_METHODS)} run directory")
        init = mean_init_position(args.mean_init_run, problem)
    result = training.run(
        problem, "vi", config, train_config(args), args.dir, resume=args.resume,
        overwrite=args.overwrite, progress=args.progress, init_position=init,
        extra_record={"posterior": "diag_gaussian"},
    )
    print(f"{result.num_epochs} epochs in {result.seconds:.1f} s "
          f"({result.seconds_per_epoch:.3f} s/epoch); run in {args.dir}")
    if args.evaluate:
        print_table(evaluate(args.dir, reference=args.reference),
                    title=f"MFVI ({args.vi_ensemble_size} samples) on {args.dataset}")
    return 0


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="mean-field VI / Bayes by Backprop with KL re-weighting",
                  add_arguments=add_arguments, run=run)
