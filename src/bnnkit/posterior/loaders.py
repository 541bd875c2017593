"""Read an approximate posterior (VI, Laplace) back from its run directory as samples.

``run.json``'s ``"posterior"`` names the kind; runs of sampling methods (HMC, SGMCMC, SGD,
ensembles) have ``"samples"`` and are read by :func:`bnnkit.evaluate.load_run` directly. Each
other kind registers ``(record, problem, rundir) -> Samples`` here, drawing its evaluation
samples with a fixed key so that repeated evaluations agree.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from bnnkit.errors import ConfigError
from bnnkit.posterior.samples import Samples

#: kind -> "module:function" with signature ``(record, problem, rundir) -> Samples``; imported
#: lazily so that reading an HMC run does not import every method.
LOADERS: dict[str, str] = {
    "diag_gaussian": "bnnkit.posterior.diag_gaussian:load_run_posterior",
    "laplace": "bnnkit.posterior.laplace:load_run_posterior",
}


def load(kind: str, record: dict, problem, rundir) -> Samples:
    """Samples of the stored posterior of kind ``kind``.

    Raises:
        ConfigError: an unknown kind.
    """
    if kind not in LOADERS:
        raise ConfigError(f"run {str(rundir.path)!r} holds an unknown posterior kind {kind!r}; "
                          f"known: samples, {', '.join(sorted(LOADERS))}")
    module, function = LOADERS[kind].split(":")
    loader: Callable = getattr(importlib.import_module(module), function)
    return loader(record, problem, rundir)
