"""Arguments shared by the minibatch methods' commands (sgd, ensemble, sgmcmc, vi)."""

from __future__ import annotations

import argparse


def add_epoch_arguments(p: argparse.ArgumentParser, *, default_eval_freq: int = 0) -> None:
    g = p.add_argument_group("minibatch training")
    g.add_argument("--init-step-size", type=float, required=True,
                   help="initial step size η₀ (of the tempered log posterior's gradient)")
    g.add_argument("--num-epochs", type=int, required=True, help="passes over the training data")
    g.add_argument("--batch-size", type=int, required=True, help="examples per step")
    g.add_argument("--eval-freq", type=int, default=default_eval_freq,
                   help="log test metrics every N epochs (0: only at the end)")
    g.add_argument("--save-freq", type=int, default=1,
                   help="write the full state every N epochs (and at the end)")
    g.add_argument("--seed", type=int, default=0)


def add_run_dir_arguments(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("run directory")
    r.add_argument("--dir", required=True, help="run directory to create (or resume)")
    r.add_argument("--resume", action="store_true",
                   help="continue the run in --dir exactly (same settings)")
    r.add_argument("--overwrite", action="store_true", help="replace the run in --dir")
    r.add_argument("--no-progress", dest="progress", action="store_false")
    r.add_argument("--no-evaluate", dest="evaluate", action="store_false",
                   help="skip the evaluation at the end")
    r.add_argument("--reference", default=None,
                   help="run directory (e.g. HMC) to compare the final predictive with")


def train_config(args: argparse.Namespace, **overrides):
    from bnnkit.training import TrainConfig

    values = dict(num_epochs=args.num_epochs, batch_size=args.batch_size,
                  eval_freq=args.eval_freq, save_freq=args.save_freq, seed=args.seed)
    values.update(overrides)
    return TrainConfig(**values)


def run_and_report(args: argparse.Namespace, method: str, method_config: dict, train,
                   title: str) -> int:
    """Train, then print the evaluation table (against ``--reference`` if given)."""
    from bnnkit import training
    from bnnkit.commands.common import problem_config
    from bnnkit.evaluate import evaluate
    from bnnkit.report.tables import print_table

    result = training.run(
        problem_config(args), method, method_config, train, args.dir, resume=args.resume,
        overwrite=args.overwrite, progress=args.progress,
    )
    print(f"{result.num_epochs} epochs in {result.seconds:.1f} s "
          f"({result.seconds_per_epoch:.3f} s/epoch); run in {args.dir}")
    if args.evaluate:
        print_table(evaluate(args.dir, reference=args.reference), title=title)
    return 0
