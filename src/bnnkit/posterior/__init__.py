"""What inference methods return: representations of p(θ | D) with ``sample(key, n)``.

- :class:`Samples`: stacked parameter samples (HMC, NUTS, SGMCMC, SGD, ensembles);
- :class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`: mean-field Gaussian (VI, IVON);
- :class:`~bnnkit.posterior.low_rank_gaussian.LowRankGaussian`: diagonal plus low-rank
  Gaussian (SWAG);
- :class:`~bnnkit.posterior.mc_dropout.MCDropout`: a dropout network's weights and rate (MC
  dropout);
- :mod:`bnnkit.posterior.laplace`: Laplace approximations (diagonal, last layer, KFAC);
- :class:`~bnnkit.posterior.mixture.Mixture`: an equal-weight mixture of approximations.

All but the mixture satisfy :class:`~bnnkit.posterior.base.Posterior`, the members the
store, the predictive and a run started from another run read; :mod:`bnnkit.posterior.store`
saves and loads them (a run's several kept approximations load as one mixture).
"""

from bnnkit.posterior.base import Posterior
from bnnkit.posterior.diag_gaussian import DiagGaussian
from bnnkit.posterior.mixture import Mixture
from bnnkit.posterior.samples import Samples

__all__ = ["DiagGaussian", "Mixture", "Posterior", "Samples"]
