"""``bnnkit samples RUN_DIR --out samples.npz``: kept samples as plain arrays, or with
``--format netcdf --out run.nc`` as ArviZ InferenceData (needs the ``bnnkit[arviz]`` extra)."""

from __future__ import annotations

import argparse

from bnnkit.commands.command import Command
from bnnkit.commands.problem_flags import add_trust_model_argument
from bnnkit.evaluation import export_samples
from bnnkit.models.imported import trusting_model
from bnnkit.report.arviz_export import group_names, write_netcdf


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory")
    p.add_argument(
        "--out",
        required=True,
        help="output file: .npz (keys: parameter paths) or, with --format netcdf, .nc",
    )
    p.add_argument(
        "--format",
        choices=("npz", "netcdf"),
        default="npz",
        help="npz: plain arrays (chains, samples, ...); netcdf: ArviZ InferenceData "
        "with posterior, sample_stats, posterior_predictive and observed_data "
        "(needs ArviZ: pip install 'bnnkit[arviz]')",
    )
    add_trust_model_argument(
        p,
        when="only --format netcdf predicts with the model (npz "
        "exports arrays and imports nothing): ",
    )


def run(args: argparse.Namespace) -> int:
    if args.format == "netcdf":
        with trusting_model(args.trust_model):
            idata = write_netcdf(args.run_dir, args.out)
        for group in group_names(idata):
            variables = idata[group].data_vars.items()
            print(f"{group}: " + ", ".join(f"{k} {tuple(v.shape)}" for k, v in variables))
        print(f"wrote {args.out}")
        return 0

    # Plain arrays: nothing is imported, whatever model the run records.
    shapes = export_samples(args.run_dir, args.out, trust_model=args.trust_model)
    for key, shape in shapes.items():
        print(f"{key}: {shape}  (chains, samples, ...)")
    print(f"wrote {args.out}")
    return 0


COMMAND = Command(
    help="export kept samples for ArviZ and other tools",
    add_arguments=add_arguments,
    run=run,
    docs="guides/samples.md",
)
