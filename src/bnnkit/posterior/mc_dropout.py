"""MC dropout's posterior (Gal & Ghahramani 2016): the trained weights and the dropout rate.

Gal and Ghahramani's approximation is ``q(W_i) = M_i diag(z_i)``, ``z_ij ~ Bernoulli(1 − p)``:
the weights times random masks of the layers' inputs. A dropout network draws those masks
itself, one per example and pass, from the key the predictive gives each pass
(:mod:`bnnkit.models.registry`), so the posterior keeps the weights once, with the rate p and
the number T of test-time passes; :meth:`MCDropout.draws` gives the weights T times, and
:func:`bnnkit.predict.predict` makes the T passes each with its own key (its masks):

    p(y | x, D) ≈ (1/T) Σ_t p(y | x, θ, z_t).

The randomness is the network's, not the weights', so :meth:`MCDropout.sample` returns the
weights n times: every draw is a pass of the same weights under fresh masks.

Example:
    >>> import jax, jax.numpy as jnp
    >>> q = MCDropout({"w": jnp.ones(3)}, dropout_rate=0.1, num_draws=4)
    >>> q.draws(jax.random.PRNGKey(0)).params["w"].shape  # (chains, passes, ...)
    (1, 4, 3)
    >>> q.meta()
    {'dropout_rate': 0.1, 'num_draws': 4}
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import storage
from bnnkit.posterior.samples import Samples
from bnnkit.types import Key, Params


@dataclasses.dataclass(frozen=True)
class MCDropout:
    """The weights of a dropout network, its rate p and T test-time passes.

    Attributes:
        params: the trained weights (a position).
        dropout_rate: p, the probability with which the network drops each input of a layer.
        num_draws: T, the passes (each with its own masks) a model average makes.
    """

    params: Params
    dropout_rate: float
    num_draws: int

    kind: ClassVar[str] = "mc_dropout"

    @property
    def mean(self) -> Params:
        """The weights: ``E_q[W_i] = (1 − p) M_i``, which flax's inverted dropout stores."""
        return self.params

    def sample(self, key: Key, n: int) -> Params:
        """The weights ``n`` times, stacked ``(n, ...)``: the masks are drawn by the network
        in each pass (``key`` unused)."""
        del key
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (n, *jnp.shape(a))), self.params)

    def draws(self, key: Key | None = None) -> Samples:
        """The weights ``num_draws`` times as one chain; the predictive gives every pass its own
        key, so each draws its own masks."""
        return Samples.from_single_chain(jax.tree.map(np.asarray, self.sample(key, self.num_draws)))

    # --- storage (bnnkit.posterior.store) ---

    def arrays(self) -> dict[str, np.ndarray]:
        return storage.flatten_tree(self.params, "params/")

    def meta(self) -> dict[str, Any]:
        return {"dropout_rate": self.dropout_rate, "num_draws": self.num_draws}

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> MCDropout:
        params = jax.tree.map(jnp.asarray, storage.unflatten_tree(template, arrays, "params/"))
        return cls(params, float(meta["dropout_rate"]), int(meta["num_draws"]))
