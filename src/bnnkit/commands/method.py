"""``bnnkit <method>``: one command per method of ``METHODS``, derived from its Config.

The flags are the problem's (:class:`bnnkit.problem.ProblemConfig`), the method's Config fields
and the run directory's. The command parses them into the two Configs, calls
:func:`bnnkit.runs.run` (what a Python user calls), then prints the evaluation table. A method
whose problem comes from the run it starts from (Laplace's ``--map-run``) takes ``--dataset``
and ``--model`` only as checks. A run its time budget stopped reports what it has, then
ends in the line of :mod:`bnnkit.commands.budget` and exit code 3.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from types import ModuleType
from typing import Any

from bnnkit import distributed, runs
from bnnkit.commands.advice import line as verdict_line
from bnnkit.commands.budget import EXIT_BUDGET, BudgetEnded
from bnnkit.commands.command import Command
from bnnkit.commands.config_file import to_toml
from bnnkit.commands.flags import add_config_arguments, add_progress_flag, config_from_args
from bnnkit.commands.problem_flags import add_problem_arguments, problem_config
from bnnkit.errors import ConfigError
from bnnkit.evaluation import check_reference, evaluate
from bnnkit.inference.base import EpochSettings, IterationSettings
from bnnkit.models.imported import trusting_model
from bnnkit.report.tables import print_table
from bnnkit.runs import budget as run_budget
from bnnkit.runs.initial import check_source_problem


def summary(module: ModuleType) -> str:
    """A method's description: the first paragraph of its module's docstring, whole (a
    sentence may run over its first line), without its full stop.

    Example:
        >>> from types import ModuleType
        >>> module = ModuleType("m", "MC dropout: training as variational\\ninference.\\n\\nMore.")
        >>> summary(module)
        'MC dropout: training as variational inference'
    """
    paragraph = (module.__doc__ or module.__name__).strip().split("\n\n")[0]
    return " ".join(paragraph.split()).rstrip(".")


def add_run_dir_arguments(p: argparse.ArgumentParser, *, shard: bool) -> None:
    """``--dir``, ``--resume``, ``--overwrite``, progress, evaluation and ``--reference``."""
    r = p.add_argument_group("run directory")
    r.add_argument("--dir", help="run directory to create (or resume); required to run")
    r.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --dir exactly (only resumable settings may change)",
    )
    r.add_argument("--overwrite", action="store_true", help="replace the run in --dir")
    if shard:
        r.add_argument(
            "--shard",
            choices=("auto", "chains", "data", "none"),
            default="auto",
            help="with several devices: split chains (members), or the training "
            "data (each minibatch), over them (default: auto)",
        )
    add_progress_flag(r)
    r.add_argument(
        "--log-every",
        "--tabulate-freq",
        type=int,
        default=None,
        metavar="N",
        help="when the output is not a terminal (a log file, CI, nohup), print a "
        "progress line every N iterations or epochs (default: every 10 %% of "
        "the run or 30 s)",
    )
    r.add_argument(
        "--no-evaluate",
        dest="evaluate",
        action="store_false",
        help="skip the evaluation at the end",
    )
    r.add_argument(
        "--reference",
        default=None,
        help="run directory (e.g. HMC) to compare the final predictive with",
    )
    r.add_argument(
        "--save-all-ensembled",
        action="store_true",
        help="accepted for bnn_hmc's commands: every kept sample is always stored",
    )


def run_summary(result) -> str:
    """What a call of the driver ran and how long it took, compilation included (the
    evaluation table's seconds per iteration are the mean after burn-in, without it).

    A run stopped by ``--max-time`` says how far it got; one extended by
    ``--until-converged`` gives its total over the blocks it ran.

    Example:
        >>> from types import SimpleNamespace
        >>> resumed = SimpleNamespace(num_units=120, units_run=20, seconds=10.5,
        ...                           seconds_per_unit=0.525, record={"loop": {"kind":
        ...                                                                    "iterations"}})
        >>> run_summary(resumed)
        '20 more iterations in 10.5 s, 0.525 s each with compilation (120 of 120 done)'
        >>> stopped = SimpleNamespace(num_units=120, units_run=50, seconds=10.0,
        ...                           seconds_per_unit=0.2, record={"loop": {"kind":
        ...     "iterations"}, "stopped": {"units_done": 50}})
        >>> run_summary(stopped)
        '50 iterations in 10.0 s, 0.2 s each with compilation (50 of 120 done)'
    """
    kind = result.record["loop"]["kind"]
    done = (result.record.get("stopped") or {}).get("units_done", result.num_units)
    until = getattr(result, "until_converged", None)
    if until is not None:
        return (
            f"{done} {kind} in {result.seconds:.1f} s over {len(until['blocks'])} "
            "blocks, compilation included"
        )
    ran = result.num_units if result.units_run is None else result.units_run
    if ran == 0:
        return f"nothing to run: all {result.num_units} {kind} were done"
    more = " more" if ran < done else ""
    line = (
        f"{ran}{more} {kind} in {result.seconds:.1f} s, {result.seconds_per_unit:.3g} s "
        "each with compilation"
    )
    return line if ran == result.num_units else f"{line} ({done} of {result.num_units} done)"


def method_command(name: str, module: ModuleType) -> Command:
    """The command of one method."""
    cls = module.Config

    def add_arguments(p: argparse.ArgumentParser) -> None:
        add_method_arguments(p, name, cls)

    def run(args: argparse.Namespace) -> int:
        return run_method(args, cls)

    return Command(
        help=summary(module),
        add_arguments=add_arguments,
        run=run,
        docs=f"reference/methods/{name}.md",
    )


def add_method_arguments(p: argparse.ArgumentParser, name: str, cls: type) -> None:
    """The flags of method ``name``'s command: the problem's (or, for a method whose problem
    comes from its source run, ``--dataset`` and ``--model`` as checks), its Config's, the run
    directory's and the hosts'."""
    if cls.PROBLEM_FROM_SOURCE:
        g = p.add_argument_group("checks")
        g.add_argument("--dataset", default=None, help="if given, must be the MAP run's")
        g.add_argument(
            "--model",
            default=None,
            help="if given, must be the MAP run's; a model whose module is "
            "outside bnnkit is imported from that run only if named here",
        )
    else:
        add_problem_arguments(p)
    add_config_arguments(p.add_argument_group(name), cls)
    add_run_dir_arguments(p, shard=issubclass(cls, (IterationSettings, EpochSettings)))
    # Read, and the processes joined, by bnnkit.cli before JAX is first used.
    add_config_arguments(p.add_argument_group("several hosts"), distributed.Hosts)
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved settings as TOML (a file for --config) and exit without running",
    )


def run_method(args: argparse.Namespace, cls: type) -> int:
    """Run the method of Config class ``cls`` on the parsed flags, then report and evaluate
    the run (process 0); the exit code.

    Raises:
        BudgetEnded: the run's time budget stopped it, after its report.
    """
    from_source = cls.PROBLEM_FROM_SOURCE
    config = config_from_args(args, cls)
    if from_source:
        problem = check_source_problem(config, dataset=args.dataset, model=args.model)
    else:
        problem = problem_config(args)
    if args.print_config:
        values = {} if from_source else dataclasses.asdict(problem)
        print(to_toml({**values, **config.to_dict()}))
        return 0
    if args.log_every is not None and args.log_every < 1:
        raise ConfigError(f"--log-every {args.log_every} must be an integer >= 1")
    if args.dir is None:
        raise ConfigError("--dir is required: the run directory to create (or resume)")
    if args.reference is not None:
        # Before the run, not after it: a bad reference must not cost a whole run.
        distributed.first_decides(lambda: check_reference(args.reference, problem.dataset))
    # A problem taken from the source run is built from that run, as its own (its data
    # may be the arrays it stored). The model named on this call (--model) may be
    # imported again to read the source run and this one back; no other.
    named = args.model if from_source else problem.model
    with trusting_model(named):
        result = runs.run(
            None if from_source else problem,
            config,
            args.dir,
            resume=args.resume,
            overwrite=args.overwrite,
            progress=args.progress,
            log_every=args.log_every,
            shard=getattr(args, "shard", "auto"),
        )
    ended = run_budget.budget_ended(result)
    if not distributed.is_writer():  # process 0 reports and evaluates the run
        return EXIT_BUDGET if ended else 0
    kept = len(result.run_dir.sample_units()) if ended else None
    _report(args, config, problem, result, named, kept)
    if ended:  # after the report: bnnkit.cli prints the continuing command, exits 3
        until = result.until_converged
        raise BudgetEnded(
            run_budget.progress(
                result.record,
                kept,
                max_time=config.budget().max_time,
                mixed=None if until is None else until["holds"],
            )
        )
    return 0


def _report(
    args: argparse.Namespace, config: Any, problem: Any, result: Any, named: Any, kept: int | None
) -> None:
    """What the run did, then its evaluation table unless ``--no-evaluate`` (``kept``: the
    samples kept by a run its budget stopped, ``None`` for one that ended)."""
    for warning in result.warnings:
        print(f"bnnkit: warning: {warning}", file=sys.stderr)
    print(f"{run_summary(result)}; run in {args.dir}")
    if result.until_converged is not None:
        print(result.until_converged["outcome"])
    info = result.record.get("posterior_info", {})
    if info.get("num_params") is not None:
        parts = [f"posterior over {info['num_params']} parameters"]
        if info.get("alpha") is not None:
            parts.append(f"prior precision {info['alpha']:.4g}")
        if info.get("log_marginal_likelihood") is not None:
            parts.append(f"log marginal likelihood {info['log_marginal_likelihood']:.6g}")
        print("; ".join(parts))
    if args.evaluate and kept == 0:
        # Not an error: the stop line below says how to go on.
        print(
            "nothing to evaluate yet: no sample was kept before the time budget ended; "
            "the continued run is evaluated when it ends"
        )
    elif args.evaluate:
        with trusting_model(named):
            evaluation = evaluate(args.dir, reference=args.reference)
        for differ in evaluation.get("reference", {}).get("settings_differ", ()):
            print(
                f"bnnkit: warning: the reference run targets another posterior: {differ}",
                file=sys.stderr,
            )
        print_table(evaluation, title=f"{config.label} on {problem.dataset}", brief=True)
        if evaluation.get("levels"):  # the last line: the verdict and what to do
            print(verdict_line(evaluation["levels"]))
