"""``bnnkit surface A B C --out DIR``: the posterior density on the plane through three points.

The grid flags are :class:`bnnkit.experiments.surface.Config`'s (bnn_hmc's
``--limit_bottom/top/left/right`` and ``--grid_size``, spelt with dashes or underscores).
bnn_hmc's ``make_posterior_surface_plot.py`` command runs as it is after the script name: its
``--checkpoint1/2/3`` are the three points (bnnkit run directories; bnn_hmc's pickled
checkpoints are never read), ``--dir`` is ``--out``, ``--plot`` is what bnnkit always does, and
its problem flags (``--dataset_name``, ``--weight_decay``, ...) are checks: the problem comes
from the runs, and a value that differs from theirs is refused, naming the run that supplies it.
"""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.flags import add_config_arguments, add_folder_flags, config_from_args
from bnnkit.commands.problem_flags import TRUST_MODEL_HELP
from bnnkit.errors import ConfigError
from bnnkit.experiments import surface
from bnnkit.experiments.surface import Config
from bnnkit.models import canonical_name
from bnnkit.models.imported import trusting_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "points",
        nargs="*",
        metavar="POINT",
        help="A, B and C: a run directory (chain 0's last sample, or a VI/Laplace "
        "run's mean), RUN:SAMPLE, RUN:CHAIN:SAMPLE, or a .npz of `bnnkit "
        "samples` with the same suffixes",
    )
    p.add_argument(
        "--out", "--dir", default=None, help="output folder (surface.npz and three PNGs); required"
    )
    add_config_arguments(p.add_argument_group("grid"), Config)
    p.add_argument(
        "--problem",
        default=None,
        metavar="RUN_DIR",
        help="the run whose problem (data, model, prior, temperature) sample files "
        "are evaluated under (default: the run directories among the points)",
    )
    add_folder_flags(p, "the surface", "--out", "continue a grid in --out that was cut off")
    b = p.add_argument_group("bnn_hmc's make_posterior_surface_plot.py flags")
    for i in (1, 2, 3):
        b.add_argument(
            f"--checkpoint{i}",
            default=None,
            metavar="RUN",
            help=f"point {'ABC'[i - 1]} (instead of the positional POINTs)",
        )
    b.add_argument("--plot", action="store_true", help="accepted: the plots are always drawn")
    for dest, flags, kind in BNN_HMC_CHECKS:
        how = (
            {"action": "store_const", "const": True}
            if kind is bool
            else {"type": kind, "metavar": dest.upper()}
        )
        check = "accepted as a check: the problem comes from the runs, and must have this value"
        if dest == "model":  # also the user's word that the runs' model may be imported
            check = f"{check}; and {TRUST_MODEL_HELP}"
        b.add_argument(*flags, dest=f"check_{dest}", default=None, **how, help=check)
    b.add_argument(
        "--seed",
        type=int,
        default=None,
        help="accepted: evaluating the surface draws nothing at random",
    )


#: bnn_hmc's problem flags, which ``bnnkit surface`` takes as checks on the runs' problem.
BNN_HMC_CHECKS = (
    ("dataset", ("--dataset", "--dataset-name"), str),
    ("model", ("--model", "--model-name"), str),
    ("weight_decay", ("--weight-decay",), float),
    ("temperature", ("--temperature",), float),
    ("subset_train_to", ("--subset-train-to",), int),
    ("float64", ("--use-float64", "--float64"), bool),
)


def _points(args: argparse.Namespace) -> list[str]:
    named = [args.checkpoint1, args.checkpoint2, args.checkpoint3]
    if any(named):
        if args.points or not all(named):
            raise ConfigError(
                "give the three points as POINT POINT POINT or as --checkpoint1/2/3"
                ", all three one way"
            )
        return named
    if len(args.points) != 3:
        raise ConfigError(
            f"{len(args.points)} points given; allowed: exactly three (A, B, C), "
            "as POINT POINT POINT or --checkpoint1/2/3"
        )
    return args.points


def _check_problem(args: argparse.Namespace, points: list[str]) -> None:
    """bnn_hmc's problem flags against the runs' problem: equal, or refused naming the run."""
    given = {dest: getattr(args, f"check_{dest}") for dest, _, _ in BNN_HMC_CHECKS}
    if not any(v is not None for v in given.values()):
        return
    runs = (
        [args.problem]
        if args.problem
        else [p for p in points if not surface.split_point(p)[0].endswith(".npz")]
    )
    problem = surface.points_problem(points, args.problem)
    for dest, flags, _ in BNN_HMC_CHECKS:
        value = given[dest]
        if value is None:
            continue
        value = canonical_name(value) if dest == "model" else value
        if value != getattr(problem, dest):
            raise ConfigError(
                f"{flags[-1]} {given[dest]} is not the problem of the points: "
                f"{runs[0] if runs else 'the runs'} supplies {dest} "
                f"{getattr(problem, dest)!r}; allowed: the same, or leave it out"
            )


def run(args: argparse.Namespace) -> int:
    if args.out is None:
        raise ConfigError("--out (bnn_hmc's --dir) is required: the output folder")
    points = _points(args)
    _check_problem(args, points)
    args.points = points
    config = config_from_args(args, surface.Config)
    # --model, a check above, is also the word that lets the runs' model be imported.
    with trusting_model(args.check_model):
        result = surface.posterior_surface(
            args.points,
            args.out,
            config,
            problem=args.problem,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=args.progress,
        )
    n = len(result.u)
    best = divmod(int(result.log_posterior.argmax()), len(result.v))
    print(
        f"{n} x {len(result.v)} grid; ‖B − A‖ = {result.u_norm:.4g}, C at "
        f"({result.points[2, 0]:.3g}, 1) with distance {result.v_norm:.4g} from the line AB"
    )
    print(
        f"highest log posterior {result.log_posterior[best]:.6g} at "
        f"({result.u[best[0]]:.3g}, {result.v[best[1]]:.3g})"
    )
    print(f"surface.npz and the plots in {args.out}")
    return 0


COMMAND = Command(
    help="the log posterior, likelihood and prior on the plane through three parameter vectors",
    add_arguments=add_arguments,
    run=run,
    docs="guides/surface.md",
)
