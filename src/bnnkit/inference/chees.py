"""ChEES: the step size and trajectory length of jittered HMC, tuned across the chains of a run.

:class:`ChEES` maximises the ChEES criterion (Hoffman, Radul & Sountsov 2021;
``blackjax.adaptation.chees_adaptation.base``). The chains of a run are gathered with
``jax.lax.all_gather`` over the vmapped axis (:data:`~bnnkit.inference.adaptation.MEMBERS`), so
every chain computes the same update. Chains stranded far below the others are left out of
every pooled statistic (:func:`pooled_chains`): ChEES's, and the mass matrix that HMC's
``"chees"`` mode pools in Stan's windows.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from blackjax.adaptation import chees_adaptation
from jax.flatten_util import ravel_pytree

from bnnkit.inference.adaptation import MEMBERS, halton_bits, jitter, like
from bnnkit.types import Params

#: ChEES leaves out of its pooled statistics a chain whose log density is more than this many
#: spreads below the median chain's (:func:`pooled_chains`).
STRANDED_SPREADS = 5.0


#: Fewer chains than this cannot outvote a stranded one (with 2 the median is their mean).
MIN_POOLED_CHAINS = 4


def pooled_chains(logdensity: jax.Array, num_params: int, axis_name: str = MEMBERS) -> jax.Array:
    r"""Whether this chain's statistics may be pooled with the others' (called inside the vmap
    over ``axis_name``).

    A chain is left out when its log density is not finite or lies more than
    :data:`STRANDED_SPREADS` spreads below the median chain's, the spread being

    .. math:: s = \max\big(1.4826\,\mathrm{MAD}(\log p),\ \sqrt{d/2}\big),

    the chains' robust standard deviation, but never below a d-dimensional Gaussian's spread of
    ``log p`` in its typical set (so chains that all sit in the typical set are all kept). A
    chain stranded in a far region (from a dispersed start) would otherwise pull every pooled
    statistic: the ChEES criterion, the harmonic-mean acceptance behind ε and the pooled mass
    matrix. With two chains the median is their mean and no chain is ever left out: ChEES
    warns below :data:`MIN_POOLED_CHAINS`.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> keep = jax.vmap(lambda lp: pooled_chains(lp, 10), axis_name=MEMBERS)
        >>> keep(jnp.array([-5.0, -7.0, -6.0, -1e6])).tolist()
        [True, True, True, False]
    """
    every = jax.lax.all_gather(logdensity, axis_name)
    finite = jnp.isfinite(every)
    median = jnp.nanmedian(jnp.where(finite, every, jnp.nan))
    mad = jnp.nanmedian(jnp.where(finite, jnp.abs(every - median), jnp.nan))
    spread = jnp.maximum(1.4826 * mad, jnp.sqrt(num_params / 2.0))
    return jnp.isfinite(logdensity) & (logdensity >= median - STRANDED_SPREADS * spread)


class ChEES:
    """ChEES adaptation of the step size and trajectory length across the chains of a run.

    Args:
        num_iterations: iterations of the whole run (sizes the Halton sequence).
        target: acceptance rate (harmonic mean over chains) the step size aims at.
        max_leapfrog_steps: the trajectory length is clipped to this many steps.
        learning_rate: Adam's rate on the log trajectory length (TFP's default, β₁ = 0).
        axis_name: the vmapped axis of the chains.
    """

    def __init__(
        self,
        num_iterations: int,
        target: float,
        max_leapfrog_steps: int,
        *,
        learning_rate: float = 0.025,
        axis_name: str = MEMBERS,
    ):
        self.bits = halton_bits(num_iterations)
        self.axis_name = axis_name
        self._init, self._update = chees_adaptation.base(
            lambda i: jitter(i, self.bits),
            lambda i: i + 1,
            optax.adam(learning_rate, b1=0.0, b2=0.95),
            target,
            0.5,
            max_leapfrog_steps,
        )

    def init(self, step_size: float, trajectory_len: float, dtype: Any):
        state = self._init(jnp.zeros((), jnp.int32), jnp.asarray(step_size, dtype))
        state = state._replace(
            trajectory_length=jnp.asarray(trajectory_len, dtype),
            log_trajectory_length_moving_average=jnp.log(jnp.asarray(trajectory_len, dtype)),
        )
        return jax.tree.map(
            lambda v: jnp.asarray(
                v, dtype if jnp.issubdtype(jnp.result_type(v), jnp.floating) else jnp.int32
            ),
            state,
        )

    def update(
        self,
        state,
        proposal_position: Params,
        proposal_momentum: Params,
        start_position: Params,
        acceptance_rate: jax.Array,
        divergent: jax.Array,
        inverse_mass: jax.Array,
        include: jax.Array | bool = True,
    ):
        """The shared update from every chain's trajectory (called inside the vmap).

        A chain whose ``include`` is false (:func:`pooled_chains`) counts as BlackJAX's
        divergent chains do: its acceptance, trajectory and position enter neither the step
        size nor the criterion (its start is NaN, which BlackJAX's means skip).
        """

        def gather(value):
            return jax.lax.all_gather(value, self.axis_name)

        def flat(tree):  # BlackJAX's criterion takes one (chains, dim) array per quantity
            return gather(ravel_pytree(tree)[0])

        start = flat(start_position)
        included = gather(jnp.asarray(include))
        start = jnp.where(included[:, None], start, jnp.nan)
        new = self._update(
            state,
            flat(proposal_position),
            flat(proposal_momentum),
            start,
            gather(acceptance_rate),
            gather(divergent) | ~included,
            inverse_mass,
        )
        return like(new, state)

    @staticmethod
    def final(state) -> tuple[jax.Array, jax.Array]:
        """The step size and trajectory length to sample with: the moving averages."""
        return (
            jnp.exp(state.log_step_size_moving_average),
            jnp.exp(state.log_trajectory_length_moving_average),
        )
