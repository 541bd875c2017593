"""``bnnkit surface A B C --out DIR``: the posterior density on the plane through three points.

The grid flags are :class:`bnnkit.experiments.surface.Config`'s (bnn_hmc's
``--limit_bottom/top/left/right`` and ``--grid_size``, spelt with dashes or underscores).
"""

from __future__ import annotations

import argparse

from bnnkit.commands import Command


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bnnkit.commands.flags import add_config_arguments
    from bnnkit.experiments.surface import Config

    p.add_argument("points", nargs=3, metavar="POINT",
                   help="A, B and C: a run directory (chain 0's last sample, or a VI/Laplace "
                        "run's mean), RUN:SAMPLE, RUN:CHAIN:SAMPLE, or a .npz of `bnnkit "
                        "samples` with the same suffixes")
    p.add_argument("--out", required=True, help="output folder (surface.npz and three PNGs)")
    add_config_arguments(p.add_argument_group("grid"), Config)
    p.add_argument("--problem", default=None, metavar="RUN_DIR",
                   help="the run whose problem (data, model, prior, temperature) sample files "
                        "are evaluated under (default: the run directories among the points)")
    p.add_argument("--resume", action="store_true",
                   help="continue a grid in --out that was cut off")
    p.add_argument("--overwrite", action="store_true", help="replace the surface in --out")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress output (a bar on a terminal, plain lines in a log)")


def run(args: argparse.Namespace) -> int:
    from bnnkit.commands.flags import config_from_args
    from bnnkit.experiments import surface

    config = config_from_args(args, surface.Config)
    result = surface.posterior_surface(args.points, args.out, config, problem=args.problem,
                                       resume=args.resume, overwrite=args.overwrite,
                                       progress=args.progress)
    n = len(result.u)
    best = divmod(int(result.log_posterior.argmax()), len(result.v))
    print(f"{n} x {len(result.v)} grid; ‖B − A‖ = {result.u_norm:.4g}, C at "
          f"({result.points[2, 0]:.3g}, 1) with distance {result.v_norm:.4g} from the line AB")
    print(f"highest log posterior {result.log_posterior[best]:.6g} at "
          f"({result.u[best[0]]:.3g}, {result.v[best[1]]:.3g})")
    print(f"surface.npz and the plots in {args.out}")
    return 0


COMMAND = Command(help="the log posterior, likelihood and prior on the plane through three "
                       "parameter vectors", add_arguments=add_arguments, run=run,
                  docs="guides/surface.md")
