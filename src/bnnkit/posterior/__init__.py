"""What inference methods return: representations of p(θ | D) with ``sample(key, n)``.

- :class:`Samples`: stacked parameter samples (HMC, NUTS, SGMCMC, SGD, ensembles);
- :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`: mean-field Gaussian (VI);
- :mod:`bnnkit.posterior.laplace`: Laplace approximations (diagonal, last layer, KFAC);
- :class:`~bnnkit.posterior.mixture.Mixture`: an equal-weight mixture of approximations.

:mod:`bnnkit.posterior.store` saves and loads any of them.
"""

from bnnkit.posterior.diag_gaussian import DiagGaussian
from bnnkit.posterior.mixture import Mixture
from bnnkit.posterior.samples import Samples

__all__ = ["DiagGaussian", "Mixture", "Samples"]
