"""bnnkit: Bayesian neural networks in JAX, with full-batch HMC as the reference posterior.

The data flow follows the package layout::

    data -> models -> priors + likelihoods -> log_posterior -> inference -> posterior
         -> predict -> metrics -> report

See ``README.md`` for the command line and a Python example.
"""

from bnnkit.errors import ConfigError

__version__ = "0.1.0"

__all__ = ["ConfigError", "__version__"]
