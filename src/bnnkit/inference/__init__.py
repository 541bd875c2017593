"""Inference methods, all on the interface of :mod:`bnnkit.inference.base`.

:data:`METHODS` maps a method's name to its module, which has ``Config`` and ``build``. The run
driver, the command line and the protocol test read it; adding a method touches its module, one
line here, one row in the protocol test and its docs.
"""

from bnnkit.inference import ensemble, hmc, laplace, mclmc, nuts, sgd, sgmcmc, vi
from bnnkit.inference.base import Method

METHODS = {
    "hmc": hmc,
    "nuts": nuts,
    "mclmc": mclmc,
    "sgd": sgd,
    "ensemble": ensemble,
    "sgmcmc": sgmcmc,
    "vi": vi,
    "laplace": laplace,
}

__all__ = ["METHODS", "Method"]
