"""``bnnkit samples RUN_DIR --out samples.npz``: kept samples as plain arrays, or with
``--format netcdf --out run.nc`` as ArviZ InferenceData (needs the ``bnnkit[arviz]`` extra)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory")
    p.add_argument("--out", required=True,
                   help="output file: .npz (keys: parameter paths) or, with --format netcdf, .nc")
    p.add_argument("--format", choices=("npz", "netcdf"), default="npz",
                   help="npz: plain arrays (chains, samples, ...); netcdf: ArviZ InferenceData "
                        "with posterior, sample_stats, posterior_predictive and observed_data "
                        "(needs ArviZ: pip install 'bnnkit[arviz]')")


def run(args: argparse.Namespace) -> int:
    if args.format == "netcdf":
        from bnnkit.report.arviz_export import group_names, write_netcdf

        idata = write_netcdf(args.run_dir, args.out)
        for group in group_names(idata):
            variables = idata[group].data_vars.items()
            print(f"{group}: " + ", ".join(f"{k} {tuple(v.shape)}" for k, v in variables))
        print(f"wrote {args.out}")
        return 0

    from bnnkit.evaluation import export_samples

    shapes = export_samples(args.run_dir, args.out)
    for key, shape in shapes.items():
        print(f"{key}: {shape}  (chains, samples, ...)")
    print(f"wrote {args.out}")
    return 0


from bnnkit.commands import Command  # noqa: E402

COMMAND = Command(help="export kept samples for ArviZ and other tools",
                  add_arguments=add_arguments, run=run,
                  docs="guides/samples.md")
