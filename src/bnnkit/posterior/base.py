"""What every stored posterior provides: the :class:`Posterior` protocol.

A method's ``posterior(kept_states)`` returns one of these (:class:`~bnnkit.posterior.Samples`,
:class:`~bnnkit.posterior.diag_gaussian.DiagGaussian`, the Laplace approximations of
:mod:`bnnkit.posterior.laplace`). Exactly these members are read from it:

- :mod:`bnnkit.posterior.store` saves it by ``kind``, ``arrays()`` and ``meta()`` and loads
  it back with ``from_arrays`` of the class its ``KINDS`` holds under that kind;
- :mod:`bnnkit.predict` averages the model over ``draws(key)`` (and linearises a Laplace
  approximation at ``mean``, when it was built with ``predictive="glm"``);
- :mod:`bnnkit.runs.initial` starts a run from another run's ``mean`` (from a chain's kept
  sample for :class:`~bnnkit.posterior.Samples`).

A new kind (a diagonal plus low-rank Gaussian, say) is its class, satisfying this protocol,
and one entry in :data:`bnnkit.posterior.store.KINDS`; nothing else dispatches on it.
:class:`~bnnkit.posterior.mixture.Mixture`, what :func:`~bnnkit.runs.stored.combine`
makes of several stored approximations, is never stored and offers ``sample`` and ``draws``
only.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from bnnkit.posterior import DiagGaussian, Samples
    >>> q = DiagGaussian({"w": jnp.zeros(3)}, {"w": jnp.ones(3)}, num_draws=4)
    >>> isinstance(q, Posterior), isinstance(Samples({"w": jnp.zeros((1, 2, 3))}), Posterior)
    (True, True)
    >>> again = DiagGaussian.from_arrays({"w": 0}, q.arrays(), q.meta())
    >>> again.draws(jax.random.PRNGKey(0)).params["w"].shape  # (chains, samples, ...)
    (1, 4, 3)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from bnnkit.types import Key, Params

if TYPE_CHECKING:
    from typing import Self

    from bnnkit.posterior.samples import Samples


@runtime_checkable
class Posterior(Protocol):
    """A representation of ``p(θ | D)`` (or of an approximation ``q(θ)``) that can be stored,
    sampled and averaged over.

    Every ``Params`` below is a pytree with the structure of the run's position (the
    network's ``{"params": ...}`` plus any latent collections).
    """

    #: The name the store files it under (``"samples"``, ``"diag_gaussian"``, ...), unique
    #: across :data:`bnnkit.posterior.store.KINDS`.
    kind: ClassVar[str]

    def sample(self, key: Key, n: int) -> Params:
        """``n`` independent draws ``θ_1..θ_n ~ q``, each leaf stacked ``(n, ...)``.

        For stored samples ``q`` is their empirical distribution ``(1/S) Σ_s δ(θ − θ_s)``
        (draws with replacement); for a Gaussian ``N(μ, Σ)`` it is ``μ + L z`` with
        ``L Lᵀ = Σ`` and ``z ~ N(0, I)``.
        """
        ...

    def draws(self, key: Key) -> Samples:
        """The parameter vectors the Bayesian model average runs over,
        ``p(y | x, D) ≈ (1/S) Σ_s p(y | x, θ_s)``, as :class:`~bnnkit.posterior.Samples`
        shaped ``(chains, samples, ...)``.

        Stored samples return themselves (``key`` unused); an approximation returns its
        ``num_draws`` draws of :meth:`sample` as one chain, so a fixed ``key`` (the run's
        evaluation key) gives the same average every time.
        """
        ...

    @property
    def mean(self) -> Params:
        """The posterior's centre, shaped like one position: ``E_q[θ]`` (μ of a Gaussian,
        θ* of a Laplace approximation, the average of stored samples). A run started from
        this posterior starts here, and the linearised predictive linearises here."""
        ...

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array that defines it, by a flat name (``"mean/params/Dense_0/kernel"``),
        for :func:`bnnkit.posterior.store.save` (npz, no pickle)."""
        ...

    def meta(self) -> dict[str, Any]:
        """Its other settings as JSON values (``{"num_draws": 20}``); ``{}`` if none."""
        ...

    @classmethod
    def from_arrays(
        cls, template: Params, arrays: dict[str, np.ndarray], meta: dict[str, Any]
    ) -> Self:
        """Rebuild it from :meth:`arrays` and :meth:`meta`; ``template`` is a position with
        the parameter tree structure (its shapes do not matter)."""
        ...
