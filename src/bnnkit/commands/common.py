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
    add_prior_arguments(g)
    g.add_argument("--noise-prior", default=None, metavar="SPEC",
                   help="infer the regression noise std σ0 under this prior instead of fixing "
                        "it, e.g. gamma:concentration=0.5,rate=1 (gamma, half_normal, "
                        "lognormal)")
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


def add_prior_arguments(g) -> None:
    """``--prior``, ``--bias-prior``, ``--layer-prior`` and ``--prior-file``."""
    g.add_argument("--prior", default=None, metavar="SPEC",
                   help="prior of every weight and bias: NAME or NAME:key=value,... e.g. "
                        "laplace:scale=0.1, student_t:df=3,scale=0.1 (families: gaussian, "
                        "fanin_gaussian, scale_mixture, mixture, logistic, laplace, student_t, "
                        "hierarchical, ard); default: gaussian with variance 1/--weight-decay")
    g.add_argument("--bias-prior", default=None, metavar="SPEC",
                   help="prior of the biases (default: that of --prior)")
    g.add_argument("--layer-prior", action="append", default=None, metavar="PATTERN=SPEC",
                   help="prior of the parameters under PATTERN, a glob over paths such as "
                        "Dense_2 or 'Dense_*/kernel'; repeatable, the last match wins")
    g.add_argument("--prior-file", default=None, metavar="TOML",
                   help="the priors from the [prior] table of a TOML file instead of the flags")


def prior_fields(args: argparse.Namespace) -> dict:
    """The prior fields of :class:`~bnnkit.problem.ProblemConfig` from the flags or the file.

    Raises:
        ConfigError: ``--prior-file`` together with a prior flag, or a bad file.
    """
    from bnnkit.errors import ConfigError
    from bnnkit.priors import load_toml

    flags = {"prior": getattr(args, "prior", None),
             "bias_prior": getattr(args, "bias_prior", None),
             "layer_priors": getattr(args, "layer_prior", None),
             "noise_prior": getattr(args, "noise_prior", None)}
    path = getattr(args, "prior_file", None)
    if path is None:
        return flags
    given = [f"--{k.replace('_', '-').replace('priors', 'prior')}" for k, v in flags.items()
             if v is not None]
    if given:
        raise ConfigError(f"--prior-file {path} sets every prior; allowed: it or {given[0]}, "
                          "not both")
    return load_toml(path)


def problem_config(args: argparse.Namespace):
    from bnnkit.problem import ProblemConfig

    return ProblemConfig(
        dataset=args.dataset, model=args.model, likelihood=args.likelihood,
        noise_std=args.noise_std, weight_decay=args.weight_decay, temperature=args.temperature,
        float64=args.float64, standardize=args.standardize,
        subset_train_to=args.subset_train_to, data_dir=args.data_dir,
        chunk_size=args.chunk_size, **prior_fields(args),
    )
