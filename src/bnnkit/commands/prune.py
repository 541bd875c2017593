"""``bnnkit prune RUN_DIR``: signal-to-noise vs magnitude pruning of a VI run's weights.

Writes to ``--out`` (default ``RUN_DIR/pruning``): ``pruning.json`` (every metric),
``pruning.md`` (the table), ``pruning.png`` (error against the share removed) and
``snr_histogram.png`` (Blundell et al.'s Fig. 4)::

    bnnkit prune runs/bbb_mnist --fractions 0 0.5 0.95 0.98
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bnnkit.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run directory of `bnnkit vi`")
    p.add_argument("--out", default=None, help="output folder (default: RUN_DIR/pruning)")
    p.add_argument("--fractions", type=float, nargs="+",
                   default=[0.0, 0.25, 0.5, 0.75, 0.95, 0.98],
                   help="shares of the weights to remove, each in [0, 1)")
    p.add_argument("--include-biases", action="store_true",
                   help="rank and prune biases too (default: weights only, as Blundell et al.)")
    p.add_argument("--member", type=int, default=0, help="which trained member to prune")


def prune_run(run_dir: str, out: str | None = None, fractions=None,
              include_biases: bool = False, member: int = 0) -> list[dict]:
    """Prune a stored VI run and write the table and figures; returns the table rows.

    Raises:
        ConfigError: not a VI run, a fraction outside [0, 1), a member that does not exist,
            or an output path that is a file.
    """
    import jax

    from bnnkit import io, pruning
    from bnnkit import problem as problem_lib
    from bnnkit.posterior import diag_gaussian
    from bnnkit.report import pruning_plots

    fractions = pruning.check_fractions(
        pruning.DEFAULT_FRACTIONS if fractions is None else fractions)
    rundir = io.RunDir(run_dir)
    if not rundir.run_file.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a bnnkit run directory (no run.json)")
    record = io.read_json(rundir.run_file)
    if record.get("posterior") != "diag_gaussian":
        raise ConfigError(f"run {str(run_dir)!r} is a {record.get('method')!r} run; allowed: a "
                          "`bnnkit vi` run (pruning ranks weights by their posterior std)")
    problem = problem_lib.build(problem_lib.ProblemConfig.from_dict(record["problem"]))
    members = diag_gaussian.load_members(problem, rundir)
    count = int(jax.tree.leaves(members.mean)[0].shape[0])
    if not 0 <= member < count:
        raise ConfigError(f"--member {member} out of range; allowed: 0..{count - 1}")
    q = diag_gaussian.member(members, member)
    rows = pruning.pruning_table(problem, q, fractions, include_biases)

    out_dir = Path(out) if out is not None else rundir.path / "pruning"
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {str(out_dir)!r} is a file; allowed: a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    task = problem.dataset.task
    io.write_json(out_dir / "pruning.json", {
        "run": str(run_dir), "dataset": problem.dataset.name, "model": problem.config.model,
        "include_biases": include_biases, "member": member, "rows": rows,
    })
    io.atomic_write_bytes(out_dir / "pruning.md", (pruning.markdown(rows, task) + "\n").encode())
    name = problem.dataset.name
    title = f"{problem.config.model} on {Path(name).stem if name.endswith('.npz') else name}"
    io.atomic_write_bytes(out_dir / "pruning.png",
                          pruning_plots.pruning_curve_png(rows, task, title=title))
    io.atomic_write_bytes(out_dir / "snr_histogram.png", pruning_plots.snr_histogram_png(
        pruning.log_snr_db(q, include_biases), fractions, title=title))
    return rows


def run(args: argparse.Namespace) -> int:
    from bnnkit import io, pruning

    rows = prune_run(args.run_dir, args.out, args.fractions, args.include_biases, args.member)
    record = io.read_json(io.RunDir(args.run_dir).run_file)
    task = record.get("dataset", {}).get("task", "classification")
    print(pruning.markdown(rows, task))
    out = args.out or str(Path(args.run_dir) / "pruning")
    print(f"table, figures and metrics in {out}")
    return 0


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="prune a VI run's weights by signal-to-noise ratio or magnitude",
                  add_arguments=add_arguments, run=run)
