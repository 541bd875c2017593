"""The flags that define a posterior (data, model, likelihood, prior, temperature, ...).

They are derived from :class:`bnnkit.problem.ProblemConfig`'s fields, plus ``--prior-file``,
which reads the prior flags from a TOML file instead.
"""

from __future__ import annotations

import argparse

from bnnkit.commands.flags import add_config_arguments, config_from_args
from bnnkit.errors import ConfigError
from bnnkit.models import allowed_names
from bnnkit.priors.spec import PRIOR_FIELDS, load_toml
from bnnkit.problem import ProblemConfig


def add_problem_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("posterior")
    add_config_arguments(g, ProblemConfig)
    add_prior_file_argument(g)
    list_models(p)


def list_models(p: argparse.ArgumentParser) -> None:
    """Name every registered model (and alias) in the help of ``--model``."""
    for action in p._actions:
        if action.dest == "model":
            action.help = f"{action.help}; one of: {allowed_names()}"


#: The help of ``--model`` on a command that reads runs (:func:`add_trust_model_argument`).
TRUST_MODEL_HELP = (
    "allow importing this model, which the run records: a model whose module is outside "
    "bnnkit is imported only when named here (a run folder may carry anyone's .py); name only "
    "code you trust. It is looked for in the installed packages, then the current folder, as "
    "python -m does"
)


def add_trust_model_argument(
    p: argparse.ArgumentParser, *, when: str = "", help: str | None = None
) -> None:
    """``--model package.module:ClassName`` on a command that reads runs: the user's word that
    the model a run records may be imported (its value is ``args.trust_model``; see
    :func:`bnnkit.models.imported.check_trusted`). ``when`` starts its help (``"for the runs
    that record it: "``); ``help`` replaces it.

    Example:
        >>> p = argparse.ArgumentParser()
        >>> add_trust_model_argument(p)
        >>> p.parse_args(["--model", "mymod:Net"]).trust_model
        'mymod:Net'
    """
    p.add_argument(
        "--model",
        dest="trust_model",
        default=None,
        metavar="package.module:ClassName",
        help=help or when + TRUST_MODEL_HELP,
    )


def add_prior_arguments(g, *, noise: bool = True) -> None:
    """The prior flags alone (``--prior``, ``--bias-prior``, ``--layer-prior``, ...)."""
    fields = PRIOR_FIELDS if noise else PRIOR_FIELDS[:-1]
    add_config_arguments(g, ProblemConfig, only=fields)
    add_prior_file_argument(g)


def add_prior_file_argument(g) -> None:
    g.add_argument(
        "--prior-file",
        default=None,
        metavar="TOML",
        help="the priors from the [prior] table of a TOML file instead of the flags",
    )


def prior_fields(args: argparse.Namespace) -> dict:
    """The prior fields of :class:`~bnnkit.problem.ProblemConfig` from the flags or the file.

    Raises:
        ConfigError: ``--prior-file`` together with a prior flag, or a bad file.
    """
    flags = {field: getattr(args, field, None) for field in PRIOR_FIELDS}
    path = getattr(args, "prior_file", None)
    if path is None:
        return flags
    given = [
        f"--{k.replace('_', '-').replace('priors', 'prior')}"
        for k, v in flags.items()
        if v is not None
    ]
    if given:
        raise ConfigError(
            f"--prior-file {path} sets every prior; allowed: it or {given[0]}, not both"
        )
    return load_toml(path)


def problem_config(args: argparse.Namespace):
    """The :class:`~bnnkit.problem.ProblemConfig` the flags describe."""
    return config_from_args(args, ProblemConfig, **prior_fields(args))
