"""Inference methods, all on the interface of :mod:`bnnkit.inference.base`.

:data:`METHODS` maps a CLI name to the method's ``build`` function; adding a method touches its
module, one line here, one row in the protocol test and its docs.
"""

from bnnkit.inference import hmc, laplace, sgd, sgmcmc, vi
from bnnkit.inference.base import Method

METHODS = {
    "hmc": hmc.build,
    "laplace": laplace.build,
    "sgd": sgd.build,
    "sgmcmc": sgmcmc.build,
    "vi": vi.build,
}

__all__ = ["METHODS", "Method", "hmc", "laplace", "sgd", "sgmcmc", "vi"]
