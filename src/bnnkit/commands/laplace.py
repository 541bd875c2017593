"""``bnnkit laplace``: Laplace approximation around the MAP of a finished SGD run."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Laplace")
    g.add_argument("--map-run", required=True,
                   help="a finished `bnnkit sgd` (or `bnnkit ensemble`) run directory")
    g.add_argument("--structure", choices=("diag", "last_layer", "kfac"), default="diag",
                   help="diag: diagonal GGN over all weights; last_layer: full GGN over the last "
                        "Dense layer; kfac: Kronecker-factored GGN per Dense layer")
    g.add_argument("--prior-precision", default=None,
                   help="'auto': isotropic Gaussian prior precision maximising the Laplace "
                        "marginal likelihood; a number: that precision; default: the curvature "
                        "of the MAP run's own prior")
    g.add_argument("--predictive", choices=("mc", "glm"), default="mc",
                   help="what evaluate uses: mc (Monte Carlo over sampled networks) or glm "
                        "(linearised network)")
    g.add_argument("--num-samples", type=int, default=30,
                   help="posterior draws for the Monte Carlo predictive and diagnostics")
    g.add_argument("--chunk-size", type=int, default=1000,
                   help="training examples per step of the curvature pass (bounds memory)")
    g.add_argument("--member", type=int, default=0, help="ensemble member to start from")
    g.add_argument("--dataset", default=None, help="if given, must be the MAP run's dataset")
    g.add_argument("--model", default=None, help="if given, must be the MAP run's model")
    g.add_argument("--seed", type=int, default=0, help="seed of the evaluation draws")
    r = p.add_argument_group("run directory")
    r.add_argument("--dir", required=True, help="run directory to create")
    r.add_argument("--resume", action="store_true",
                   help="leave a finished run as it is (its settings must match)")
    r.add_argument("--overwrite", action="store_true", help="replace the run in --dir")
    r.add_argument("--no-progress", dest="progress", action="store_false")
    r.add_argument("--no-evaluate", dest="evaluate", action="store_false",
                   help="skip the evaluation at the end")
    r.add_argument("--reference", default=None,
                   help="run directory (e.g. HMC) to compare the predictive with")


def run(args: argparse.Namespace) -> int:
    from bnnkit import laplace
    from bnnkit.evaluate import evaluate
    from bnnkit.report.tables import print_table

    result = laplace.fit(
        args.map_run, args.dir, structure=args.structure, prior_precision=args.prior_precision,
        predictive=args.predictive, num_samples=args.num_samples, chunk_size=args.chunk_size,
        member=args.member, seed=args.seed, dataset=args.dataset, model=args.model,
        resume=args.resume, overwrite=args.overwrite, progress=args.progress,
    )
    info = result.posterior.info
    parts = [f"Laplace ({args.structure}) over {info['num_params']} parameters"]
    if info.get("alpha") is not None:
        parts.append(f"prior precision {info['alpha']:.4g}")
    if info.get("log_marginal_likelihood") is not None:
        parts.append(f"log marginal likelihood {info['log_marginal_likelihood']:.6g}")
    parts.append(f"{result.seconds:.1f} s" if result.seconds else "already finished")
    print("; ".join(parts) + f"; run in {args.dir}")
    if args.evaluate:
        print_table(evaluate(args.dir, reference=args.reference),
                    title=f"Laplace ({args.structure}, {args.predictive}) on "
                          f"{result.problem.dataset.name}")
    return 0


from bnnkit.commands import Command  # noqa: E402  (after the functions it names)

COMMAND = Command(help="Laplace approximation around the MAP of an SGD run",
                  add_arguments=add_arguments, run=run)
