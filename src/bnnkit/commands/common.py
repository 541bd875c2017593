"""Arguments shared by every command that defines a posterior (data, model, prior, ...)."""

from __future__ import annotations

import argparse


def add_problem_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("posterior")
    g.add_argument("--dataset", required=True,
                   help="registry name (yacht_0 = yacht, split 0) or path to an .npz file")
    g.add_argument("--model", required=True, help="model name (see the README)")
    g.add_argument("--likelihood", choices=("gaussian", "categorical"), default=None,
                   help="default: gaussian for regression, categorical for classification")
    g.add_argument("--noise-std", type=float, default=None,
                   help="fixed Gaussian noise std (in the units the model sees); default: the "
                        "network outputs its own std")
    g.add_argument("--weight-decay", type=float, default=1.0,
                   help="precision λ of the Gaussian prior N(0, 1/λ)")
    g.add_argument("--temperature", type=float, default=1.0, help="posterior temperature T")
    g.add_argument("--float64", action="store_true", help="compute in double precision")
    g.add_argument("--standardize", action="store_true", default=None,
                   help="standardise a user .npz file with its training statistics")
    g.add_argument("--subset-train-to", type=int, default=None,
                   help="keep only the first N training examples")
    g.add_argument("--data-dir", default=None,
                   help="folder with dataset files (default: $BNNKIT_DATA_DIR or the cache)")
    g.add_argument("--chunk-size", type=int, default=None,
                   help="evaluate the full-batch likelihood in chunks of N examples")


def problem_config(args: argparse.Namespace):
    from bnnkit.problem import ProblemConfig

    return ProblemConfig(
        dataset=args.dataset, model=args.model, likelihood=args.likelihood,
        noise_std=args.noise_std, weight_decay=args.weight_decay, temperature=args.temperature,
        float64=args.float64, standardize=args.standardize,
        subset_train_to=args.subset_train_to, data_dir=args.data_dir,
        chunk_size=args.chunk_size,
    )
