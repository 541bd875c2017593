"""Posterior represented by stacked parameter samples (HMC, NUTS, SGMCMC, SGD, ensembles)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit import storage
from bnnkit.types import Key, Params


@dataclasses.dataclass(frozen=True)
class Samples:
    """Parameter samples, chain-major: every leaf is ``(num_chains, num_samples, ...)``.

    Example:
        >>> post = Samples({"w": jnp.zeros((2, 10, 3))})
        >>> post.num_chains, post.num_samples, post.mean["w"].shape
        (2, 10, (3,))
        >>> Samples.from_single_chain({"w": jnp.zeros((10, 3))}).num_chains
        1
        >>> Samples.concatenate([post, post]).num_samples
        20
    """

    params: Params

    kind: ClassVar[str] = "samples"

    @classmethod
    def from_single_chain(cls, params: Params) -> Samples:
        """Wrap samples stacked as ``(num_samples, ...)`` as one chain."""
        return cls(jax.tree.map(lambda a: a[None], params))

    @classmethod
    def concatenate(cls, parts: Sequence[Samples], axis: int = 1) -> Samples:
        """Join samples along the sample axis (1) or the chain axis (0)."""
        return cls(
            jax.tree.map(lambda *a: np.concatenate(a, axis=axis), *[p.params for p in parts])
        )

    @property
    def num_chains(self) -> int:
        return int(jax.tree.leaves(self.params)[0].shape[0])

    @property
    def num_samples(self) -> int:
        return int(jax.tree.leaves(self.params)[0].shape[1])

    @property
    def mean(self) -> Params:
        """The average of every stored sample, ``(1/S) Σ_s θ_s``, shaped like one position."""
        return jax.tree.map(lambda a: np.mean(np.asarray(a), axis=(0, 1)), self.params)

    def flat(self) -> Params:
        """All samples along one leading axis, chain-major: ``(chains * samples, ...)``."""
        return jax.tree.map(lambda a: a.reshape((-1, *a.shape[2:])), self.params)

    def sample(self, key: Key, n: int) -> Params:
        """``n`` draws with replacement from the stored samples, stacked ``(n, ...)``."""
        flat = self.flat()
        total = jax.tree.leaves(flat)[0].shape[0]
        idx = jax.random.randint(key, (n,), 0, total)
        return jax.tree.map(lambda a: jnp.asarray(a)[idx], flat)

    def draws(self, key: Key | None = None) -> Samples:
        """The samples themselves: what a Bayesian model average runs over."""
        del key
        return self

    # --- storage (bnnkit.posterior.store) ---

    def arrays(self) -> dict[str, np.ndarray]:
        return storage.flatten_tree(self.params)

    def meta(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_arrays(cls, template: Params, arrays: dict, meta: dict) -> Samples:
        del meta
        return cls(storage.unflatten_tree(template, arrays))


class DrawnFromSample:
    """Mixin for a posterior with ``sample(key, n)`` and ``num_draws``: its :meth:`draws` and
    the :meth:`meta` it records.

    Example:
        >>> from bnnkit.posterior.diag_gaussian import DiagGaussian
        >>> q = DiagGaussian({"w": jnp.zeros(3)}, {"w": jnp.ones(3)}, num_draws=4)
        >>> q.draws(jax.random.PRNGKey(0)).num_chains
        1
    """

    num_draws: int | None

    def sample(self, key: Key, n: int) -> Params:
        raise NotImplementedError

    def draws(self, key: Key, n: int | None = None) -> Samples:
        """``n`` (default ``num_draws``) weight samples as one chain, for a model average."""
        n = self.num_draws if n is None else n
        if n is None:
            raise ValueError(
                "number of draws unknown: pass n or build the posterior with num_draws"
            )
        return Samples.from_single_chain(jax.tree.map(np.asarray, self.sample(key, n)))

    def meta(self) -> dict[str, Any]:
        """What ``run.json`` records beside the arrays: ``num_draws``."""
        return {"num_draws": self.num_draws}
