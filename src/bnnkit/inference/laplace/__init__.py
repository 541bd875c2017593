"""Laplace approximations around a MAP estimate: the method and its pieces.

- :mod:`~bnnkit.inference.laplace.method`: ``Config`` and ``build`` (the one method interface);
- :mod:`~bnnkit.inference.laplace.ggn`: the generalised Gauss-Newton matrix in bounded memory
  (diagonal, last-layer block, KFAC factors);
- :mod:`~bnnkit.inference.laplace.output_covariance`: output covariances of the linearised
  network, for each structure;
- :mod:`~bnnkit.inference.laplace.dense_taps`: Dense-layer inputs and pre-activation gradients
  through flax interception;
- :mod:`~bnnkit.inference.laplace.prior_curvature`: the prior's curvature by autodiff;
- :mod:`~bnnkit.inference.laplace.evidence`: damping and the marginal likelihood;
- :mod:`~bnnkit.inference.laplace.structures`: the diagonal, last-layer and KFAC posteriors.
"""

from bnnkit.inference.laplace.method import Config, LaplaceInfo, LaplaceState, build

__all__ = ["Config", "LaplaceInfo", "LaplaceState", "build"]
