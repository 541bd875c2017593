"""Inference methods, all on the interface of :mod:`bnnkit.inference.base`.

:data:`METHODS` maps a method's name to its module, which has ``Config`` and ``build``. The run
driver, the command line and the protocol test read it; adding a method touches its module, one
line here, one row in the protocol test and its docs.

Importing it lowers JAX's Threefry hash without its loop on CPU (:mod:`bnnkit.threefry_lowering`:
the same bits, a faster iteration), before any method's program is compiled.
"""

from bnnkit.inference import (
    dropout,
    ensemble,
    hmc,
    ivon,
    laplace,
    mclmc,
    nuts,
    sgd,
    sgmcmc,
    swag,
    vi,
)
from bnnkit.inference.base import Method
from bnnkit.threefry_lowering import install

install()

METHODS = {
    "hmc": hmc,
    "nuts": nuts,
    "mclmc": mclmc,
    "sgd": sgd,
    "ensemble": ensemble,
    "sgmcmc": sgmcmc,
    "vi": vi,
    "laplace": laplace,
    "swag": swag,
    "ivon": ivon,
    "dropout": dropout,
}

__all__ = ["METHODS", "Method"]
