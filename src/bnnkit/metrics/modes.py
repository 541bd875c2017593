r"""Agreement between chains, and the distinct modes the chains sit in.

Chains started in different places (one per deep-ensemble member) can each mix well inside
their own mode and still never meet: split R-hat across chains then stays high whatever the
budget. This module says which chains agree, by the classic split R-hat of Gelman et al.
(BDA3 §11.4) below ``threshold`` on at least ``share`` of the quantities, applied to any set of
chains; the verdict's level 2 gives the modes as evidence where its halves disagree
(:func:`bnnkit.metrics.halves.modes`).

**Split R-hat of a set of chains from half-chain statistics.** Each chain of N draws is cut
into its first and last n = ⌊N/2⌋ draws (the last draw is dropped when N is odd, as
:func:`bnnkit.metrics.diagnostics.split_rhat` does). For a set C of chains, the 2|C| halves
h with means x̄_h and variances s²_h (ddof 1) give

.. math:: W = \operatorname{mean}_h s^2_h, \qquad B = n \operatorname{Var}_h(\bar x_h)
          \ \text{(ddof 1)}, \qquad \hat R = \sqrt{(B/W + n - 1)/n},

BlackJAX's ``potential_scale_reduction`` of the halves, in float64. Each chain's half means and
variances are computed once (:class:`HalfStatistics`), so the R-hat of any set of chains costs
O(|C| · quantities) and grouping chains into modes needs no pass over the draws. A quantity
that does not vary over the set's draws has no R-hat (NaN) and is left out of the share; one
whose halves are each constant but differ has R-hat = ∞ and fails.

**Modes** (:func:`group_modes`): if all chains pass the rule together, they are one mode.
Otherwise chains are taken in order; each joins the earlier group with which the set still
passes the rule, on the largest share of quantities, or opens a new group. So every group
passes the between-chain rule on its own, and there is one mode exactly when the between-chain
check's R-hat part passes for all chains.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> draws = rng.normal(size=(4, 400, 50))
    >>> draws[1::2] += 5.0  # chains 1 and 3 sit 5 standard deviations away
    >>> group_modes(HalfStatistics.of(draws), threshold=1.05, share=0.95)
    [[0, 2], [1, 3]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bnnkit.errors import ConfigError


class HalfStatistics(NamedTuple):
    """The means and variances (ddof 1) of each chain's two halves, per quantity.

    Attributes:
        mean: (chains, 2, quantities).
        var: (chains, 2, quantities).
        length: n, the draws in each half.
    """

    mean: np.ndarray
    var: np.ndarray
    length: int

    @classmethod
    def of(cls, draws: np.ndarray) -> HalfStatistics:
        """The half statistics of draws shaped (chains, samples, ...), at least 4 samples per
        chain (so that each half has a variance).

        Raises:
            ConfigError: fewer than 4 samples per chain.
        """
        x = np.asarray(draws, np.float64)
        if x.ndim < 2 or x.shape[1] < 4:
            raise ConfigError(
                f"split R-hat needs draws shaped (chains, samples, ...) with at "
                f"least 4 samples per chain, got shape {x.shape}"
            )
        chains, samples = x.shape[:2]
        x = x.reshape(chains, samples, -1)
        n = samples // 2
        halves = (x[:, :n], x[:, n : 2 * n])  # views: no copy of the draws
        return cls(
            np.stack([h.mean(axis=1) for h in halves], axis=1),
            np.stack([h.var(axis=1, ddof=1) for h in halves], axis=1),
            n,
        )

    @property
    def num_chains(self) -> int:
        return self.mean.shape[0]


def split_rhat(stats: HalfStatistics, chains: Sequence[int] | None = None) -> np.ndarray:
    """Split R-hat per quantity of a set of chains (all when ``chains`` is ``None``).

    Returns:
        (quantities,): NaN where the quantity does not vary over the set's draws, ∞ where
        each half is constant but the halves differ.

    Example:
        >>> import numpy as np
        >>> from bnnkit.metrics import diagnostics
        >>> draws = np.random.default_rng(1).normal(size=(3, 101, 5))
        >>> bool(np.allclose(split_rhat(HalfStatistics.of(draws)),
        ...                  diagnostics.split_rhat(draws), rtol=1e-5))
        True
    """
    index = slice(None) if chains is None else list(chains)
    means = stats.mean[index].reshape(-1, stats.mean.shape[-1])
    variances = stats.var[index].reshape(-1, stats.var.shape[-1])
    n = stats.length
    within = variances.mean(axis=0)
    between = n * means.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt((between / within + n - 1) / n)
    # W = 0 and B = 0: the quantity never changes over these draws, so R-hat is undefined.
    return np.where((within == 0) & (between == 0), np.nan, np.where(within == 0, np.inf, rhat))


def share_below(rhat: np.ndarray, threshold: float) -> float:
    """The share of quantities with a defined R-hat that is below ``threshold`` (1.0 when none
    is defined: quantities that never change cannot disagree).

    Example:
        >>> share_below(np.array([1.0, 1.2, np.nan, np.inf]), 1.05)
        0.3333333333333333
    """
    rhat = np.asarray(rhat, np.float64).ravel()
    defined = ~np.isnan(rhat)
    return float(np.mean(rhat[defined] < threshold)) if defined.any() else 1.0


def agree(
    stats: HalfStatistics, chains: Sequence[int], *, threshold: float, share: float
) -> tuple[bool, float]:
    """Whether ``chains`` pass the between-chain rule together, and their share below.

    A single chain agrees with itself.
    """
    if len(chains) < 2:
        return True, 1.0
    below = share_below(split_rhat(stats, chains), threshold)
    return below >= share, below


def group_modes(stats: HalfStatistics, *, threshold: float, share: float) -> list[list[int]]:
    """The chains grouped into distinct modes (see the module's docstring for the rule).

    Returns:
        Groups of chain indices, each in increasing order, the groups in the order of their
        first chain.
    """
    everyone = list(range(stats.num_chains))
    if agree(stats, everyone, threshold=threshold, share=share)[0]:
        return [everyone]
    groups: list[list[int]] = []
    for chain in everyone:
        best, best_share = None, -1.0
        for group in groups:
            passes, below = agree(stats, [*group, chain], threshold=threshold, share=share)
            if passes and below > best_share:
                best, best_share = group, below
        if best is None:
            groups.append([chain])
        else:
            best.append(chain)
    return groups
