"""bnnkit: Bayesian neural networks in JAX, with full-batch HMC as the reference posterior.

The data flow follows the package layout::

    data -> models -> priors + likelihoods -> log_posterior -> inference -> posterior
         -> predict -> metrics -> report

The names below are the public API; each is the object of the module that defines it
(``bnnkit.run`` is :func:`bnnkit.runs.run`, ``bnnkit.HMC`` is
:class:`bnnkit.inference.hmc.Config`, ...). They are imported on first use, so ``import bnnkit``
stays cheap until one is touched.

- data and problem: :func:`load_dataset`, :class:`ProblemConfig`, :func:`build_problem`, and
  :class:`Problem` (:meth:`Problem.from_arrays`: your own arrays and Flax module);
- methods: :data:`METHODS` (name -> module with ``Config`` and ``build``) and each method's
  Config under the name it states, ``Config.API_NAME`` (:class:`HMC`, :class:`SGD`,
  :class:`Ensemble`, ...): these names and ``__all__`` are derived from :data:`METHODS`;
- runs: :func:`run` (a method on a problem, into a run directory), :func:`sample` (any log
  density, in memory or into a run directory), :func:`load_chains`, :func:`evaluate`,
  :func:`export_samples`;
- per-parameter MCMC diagnostics (Vehtari et al. 2021, equal to ArviZ's): :func:`summary`
  (:class:`Summary`), :func:`rhat`, :func:`ess_bulk`, :func:`ess_tail`, :func:`mcse_mean`,
  :func:`mcse_sd`, :func:`mcse_quantile`;
- :class:`ConfigError`: every invalid input, named in the message.

Example:
    >>> import tempfile
    >>> import bnnkit
    >>> problem = bnnkit.ProblemConfig("yacht_0", "mlp_regression_small", noise_std=0.35)
    >>> run_dir = tempfile.mkdtemp() + "/sgd"
    >>> _ = bnnkit.run(problem, bnnkit.SGD(init_step_size=1e-4, num_epochs=2, batch_size=64),
    ...                run_dir, progress=False)
    >>> sorted(bnnkit.evaluate(run_dir)["test"])
    ['nll', 'rmse']

See ``docs/`` (``mkdocs serve``) for the command line, tutorials and every method's settings.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from bnnkit.errors import ConfigError

__version__ = "0.1.0"

# Public name -> (module, attribute). Everything but ConfigError pulls in JAX, so it is
# imported when first asked for (PEP 562) rather than by ``import bnnkit``. The methods'
# Configs are not listed: they come from METHODS (_method_configs).
_LAZY: dict[str, tuple[str, str]] = {
    "load_dataset": ("bnnkit.data", "load"),
    "Problem": ("bnnkit.problem", "Problem"),
    "ProblemConfig": ("bnnkit.problem", "ProblemConfig"),
    "build_problem": ("bnnkit.problem", "build"),
    "METHODS": ("bnnkit.inference", "METHODS"),
    "run": ("bnnkit.runs", "run"),
    "sample": ("bnnkit.runs", "sample"),
    "load_chains": ("bnnkit.runs", "load_chains"),
    "evaluate": ("bnnkit.evaluation", "evaluate"),
    "export_samples": ("bnnkit.evaluation", "export_samples"),
    "summary": ("bnnkit.metrics.mcmc_summary", "summary"),
    "Summary": ("bnnkit.metrics.mcmc_summary", "Summary"),
    "rhat": ("bnnkit.metrics.mcmc", "rhat"),
    "ess_bulk": ("bnnkit.metrics.mcmc", "ess_bulk"),
    "ess_tail": ("bnnkit.metrics.mcmc", "ess_tail"),
    "mcse_mean": ("bnnkit.metrics.mcmc", "mcse_mean"),
    "mcse_sd": ("bnnkit.metrics.mcmc", "mcse_sd"),
    "mcse_quantile": ("bnnkit.metrics.mcmc", "mcse_quantile"),
}

# Names defined here, not imported lazily.
_EAGER = ("ConfigError", "__version__")

if TYPE_CHECKING:
    # What static checkers see (they cannot run METHODS): the names as of this writing. At run
    # time every name, a new method's Config included, comes from _LAZY and METHODS, and
    # __all__ from __getattr__; tests/test_public_api.py checks this list against it.
    __all__ = [
        "HMC",
        "IVON",
        "MCLMC",
        "METHODS",
        "NUTS",
        "SGD",
        "SGMCMC",
        "SWAG",
        "VI",
        "ConfigError",
        "Dropout",
        "Ensemble",
        "Laplace",
        "Problem",
        "ProblemConfig",
        "Summary",
        "__version__",
        "build_problem",
        "ess_bulk",
        "ess_tail",
        "evaluate",
        "export_samples",
        "load_chains",
        "load_dataset",
        "mcse_mean",
        "mcse_quantile",
        "mcse_sd",
        "rhat",
        "run",
        "sample",
        "summary",
    ]

    from bnnkit.data import load as load_dataset
    from bnnkit.evaluation import evaluate, export_samples
    from bnnkit.inference import METHODS
    from bnnkit.inference.dropout import Config as Dropout
    from bnnkit.inference.ensemble import Config as Ensemble
    from bnnkit.inference.hmc import Config as HMC  # noqa: N814
    from bnnkit.inference.ivon import Config as IVON  # noqa: N814
    from bnnkit.inference.laplace import Config as Laplace
    from bnnkit.inference.mclmc import Config as MCLMC  # noqa: N814
    from bnnkit.inference.nuts import Config as NUTS  # noqa: N814
    from bnnkit.inference.sgd import Config as SGD  # noqa: N814
    from bnnkit.inference.sgmcmc import Config as SGMCMC  # noqa: N814
    from bnnkit.inference.swag import Config as SWAG  # noqa: N814
    from bnnkit.inference.vi import Config as VI  # noqa: N814
    from bnnkit.metrics.mcmc import (
        ess_bulk,
        ess_tail,
        mcse_mean,
        mcse_quantile,
        mcse_sd,
        rhat,
    )
    from bnnkit.metrics.mcmc_summary import Summary, summary
    from bnnkit.problem import Problem, ProblemConfig
    from bnnkit.problem import build as build_problem
    from bnnkit.runs import load_chains, run, sample


def _method_configs() -> dict[str, tuple[str, str]]:
    """Each registered method's Config by its public name, ``Config.API_NAME`` (imports JAX).

    Empty while :mod:`bnnkit.inference` is itself being imported, so that a look-up made
    during that import (``from bnnkit import ...``) cannot re-enter it.
    """
    inference = sys.modules.get("bnnkit.inference")
    if inference is not None and not hasattr(inference, "METHODS"):
        return {}
    methods = importlib.import_module("bnnkit.inference").METHODS
    return {m.Config.API_NAME: (m.__name__, "Config") for m in methods.values()}


def __getattr__(name: str) -> Any:
    if name == "__all__":
        configs = _method_configs()
        if not configs:  # asked while the methods are being imported: not final yet
            return sorted({*_EAGER, *_LAZY})
        value: Any = sorted({*_EAGER, *_LAZY, *configs})
    else:
        # A Config's name is a class name, capitalised; other names (submodules being
        # imported, dunder probes) never import the methods.
        source = _LAZY.get(name) or (_method_configs().get(name) if name[:1].isupper() else None)
        if source is None:
            raise AttributeError(f"module 'bnnkit' has no attribute {name!r}")
        value = getattr(importlib.import_module(source[0]), source[1])
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_method_configs()})
