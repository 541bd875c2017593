"""An equal-weight mixture of posterior approximations: the members of a VI ensemble, or the
approximations a run kept at several epochs.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit.posterior.diag_gaussian import DiagGaussian
    >>> q = DiagGaussian({"w": jnp.zeros(2)}, {"w": jnp.ones(2)}, num_draws=3)
    >>> mix = Mixture((q, q))
    >>> mix.draws(jax.random.PRNGKey(0)).params["w"].shape  # (components, draws, ...)
    (2, 3, 2)
    >>> mix.sample(jax.random.PRNGKey(1), 5)["w"].shape
    (5, 2)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from bnnkit.posterior.samples import Samples
from bnnkit.types import Key, Params


@dataclasses.dataclass(frozen=True)
class Mixture:
    """``(1/K) Σ_k q_k`` over component posteriors that each have ``sample`` and ``draws``.

    Attributes:
        components: the K posteriors (e.g. one :class:`DiagGaussian` per VI member).
    """

    components: tuple[Any, ...]

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws: a uniformly chosen component, then a draw from it, stacked ``(n, ...)``."""
        pick_key, draw_key = jax.random.split(key)
        which = jax.random.randint(pick_key, (n,), 0, len(self.components))
        per = [c.sample(jax.random.fold_in(draw_key, k), n) for k, c in enumerate(self.components)]
        return jax.tree.map(lambda *leaves: jnp.stack(leaves)[which, jnp.arange(n)], *per)

    def draws(self, key: Key) -> Samples:
        """Each component's own draws (``draws(fold_in(key, k))``) as chain k."""
        return Samples.concatenate(
            [c.draws(jax.random.fold_in(key, k)) for k, c in enumerate(self.components)], axis=0
        )
