"""Posterior represented by stacked parameter samples (HMC, SGMCMC, ensembles)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

Params = Any


@dataclasses.dataclass(frozen=True)
class Samples:
    """Parameter samples, chain-major: every leaf is ``(num_chains, num_samples, ...)``.

    Example:
        >>> post = Samples({"w": jnp.zeros((2, 10, 3))})
        >>> post.num_chains, post.num_samples
        (2, 10)
        >>> Samples.from_single_chain({"w": jnp.zeros((10, 3))}).num_chains
        1
    """

    params: Params

    @classmethod
    def from_single_chain(cls, params: Params) -> Samples:
        """Wrap samples stacked as ``(num_samples, ...)`` as one chain."""
        return cls(jax.tree.map(lambda a: a[None], params))

    @property
    def num_chains(self) -> int:
        return int(jax.tree.leaves(self.params)[0].shape[0])

    @property
    def num_samples(self) -> int:
        return int(jax.tree.leaves(self.params)[0].shape[1])

    def flat(self) -> Params:
        """All samples along one leading axis, chain-major: ``(chains * samples, ...)``."""
        return jax.tree.map(lambda a: a.reshape((-1, *a.shape[2:])), self.params)

    def sample(self, key: jax.Array, n: int) -> Params:
        """``n`` draws with replacement from the stored samples, stacked ``(n, ...)``."""
        flat = self.flat()
        total = jax.tree.leaves(flat)[0].shape[0]
        idx = jax.random.randint(key, (n,), 0, total)
        return jax.tree.map(lambda a: jnp.asarray(a)[idx], flat)
