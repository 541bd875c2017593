"""``bnnkit samples RUN_DIR --out samples.npz``: kept samples as plain arrays."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory")
    p.add_argument("--out", required=True, help="output .npz (keys: parameter paths)")


def run(args: argparse.Namespace) -> int:
    from bnnkit.evaluate import export_samples

    shapes = export_samples(args.run_dir, args.out)
    for key, shape in shapes.items():
        print(f"{key}: {shape}  (chains, samples, ...)")
    print(f"wrote {args.out}")
    return 0


from bnnkit.commands import Command  # noqa: E402

COMMAND = Command(help="export kept samples for ArviZ and other tools",
                  add_arguments=add_arguments, run=run)
