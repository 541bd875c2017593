"""Prior predictive: what a network says before it sees data.

Regression: functions ``f(x; θ)``, ``θ ~ p(θ)``, on a 1-D input grid. With the fan-in scaled
Gaussian N(0, σ²/H) on an MLP of width H, ``f(x)`` is a sum of H independent terms of variance
O(1/H), so as H grows the draws approach a Gaussian process (Neal 1996): the spread stays put
and the excess kurtosis of ``f(x)`` goes to 0.

Classification: softmax probabilities ``p(y | x, θ)`` on real inputs; their spread (single draws
confident or not, the prior BMA near uniform or not) is what a prior says about classes.
"""

from __future__ import annotations

import dataclasses
import io as _bytes_io
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from bnnkit import storage
from bnnkit.errors import ConfigError
from bnnkit.log_posterior import network_variables

Position = Any


def draw_outputs(
    key: jax.Array,
    apply: Callable[[Position, jax.Array], jax.Array],
    prior: Any,
    like: Position,
    x: jax.Array,
    num_draws: int,
) -> np.ndarray:
    """Network outputs at ``x`` for ``num_draws`` draws of the position from ``prior``.

    Args:
        key: PRNG key; draw s uses ``split(key, num_draws)[s]``.
        apply: ``apply(variables, x)`` of the network.
        prior: has ``sample(key, like)``.
        like: a position to shape the draws.
        x: inputs (batch, ...).
        num_draws: S.

    Returns:
        (S, batch, outputs) array.

    Example:
        >>> import jax.numpy as jnp
        >>> from bnnkit import models, priors
        >>> model = models.get("linear", num_outputs=1)
        >>> grid = jnp.linspace(-1.0, 1.0, 5)
        >>> params = model.init(jax.random.PRNGKey(0), grid[:1, None])
        >>> out = draw_outputs(jax.random.PRNGKey(1), model.apply, priors.Gaussian(1.0), params,
        ...                    grid[:, None], 50)
        >>> out.shape
        (50, 5, 1)
    """
    if num_draws < 1:
        raise ConfigError(f"number of draws {num_draws} must be >= 1")

    def one(k):
        return apply(network_variables(prior.sample(k, like)), x)

    # lax.map: one draw's parameters in memory at a time.
    return np.asarray(jax.jit(lambda ks: jax.lax.map(one, ks))(jax.random.split(key, num_draws)))


@dataclasses.dataclass(frozen=True)
class FunctionDraws:
    """Prior function draws of one network on a 1-D grid."""

    label: str
    grid: np.ndarray
    values: np.ndarray  # (S, P)

    def excess_kurtosis(self, at: float = 1.0) -> float:
        """Excess kurtosis of f at the grid point nearest ``at`` (0 for a Gaussian)."""
        f = self.values[:, int(np.argmin(np.abs(self.grid - at)))]
        c = f - f.mean()
        return float(np.mean(c**4) / np.mean(c**2) ** 2 - 3.0)


def _save(fig, out: str | os.PathLike) -> None:
    import matplotlib.pyplot as plt

    buffer = _bytes_io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    storage.atomic_write_bytes(out, buffer.getvalue())


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_out(out: str | os.PathLike) -> None:
    """Refuse an output path whose folder does not exist, before any work is done."""
    parent = os.path.dirname(os.path.abspath(os.fspath(out)))
    if not os.path.isdir(parent):
        raise ConfigError(f"output folder {parent!r} does not exist")


def plot_functions(
    panels: Sequence[FunctionDraws],
    title: str,
    out: str | os.PathLike,
    max_lines: int = 30,
    at: float = 1.0,
) -> None:
    """Function draws (top) and the distribution of f(``at``) (bottom), one column per panel."""
    plt = _pyplot()
    n = len(panels)
    fig, axes = plt.subplots(2, n, figsize=(4.2 * n, 6.4), squeeze=False)
    for col, panel in enumerate(panels):
        ax = axes[0, col]
        mean, sd = panel.values.mean(axis=0), panel.values.std(axis=0)
        ax.fill_between(
            panel.grid,
            mean - 2 * sd,
            mean + 2 * sd,
            color="C0",
            alpha=0.15,
            label="±2 sd over draws",
        )
        for f in panel.values[:max_lines]:
            ax.plot(panel.grid, f, color="C0", lw=0.8, alpha=0.6)
        ax.set_title(panel.label)
        ax.set_xlabel("x")
        if col == 0:
            ax.set_ylabel("f(x), prior draws")
            ax.legend(loc="upper left", fontsize=8)
        ax = axes[1, col]
        i = int(np.argmin(np.abs(panel.grid - at)))
        f = panel.values[:, i]
        ax.hist(f, bins=30, density=True, color="C1", alpha=0.7)
        z = np.linspace(f.min(), f.max(), 200)
        s = f.std() if f.std() > 0 else 1.0
        ax.plot(
            z,
            np.exp(-0.5 * ((z - f.mean()) / s) ** 2) / (s * np.sqrt(2 * np.pi)),
            color="k",
            lw=1,
            label="Gaussian, same mean/sd",
        )
        ax.set_xlabel(f"f({panel.grid[i]:.2f})")
        ax.set_title(f"excess kurtosis {panel.excess_kurtosis(at):.2f}", fontsize=9)
        if col == 0:
            ax.set_ylabel("density over draws")
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, out)


def plot_class_probabilities(probs: np.ndarray, title: str, out: str | os.PathLike) -> None:
    """Histogram of max class probabilities (single draws and prior BMA) and class shares.

    Args:
        probs: (S, N, K) prior predictive class probabilities.
    """
    plt = _pyplot()
    bma = probs.mean(axis=0)
    k = probs.shape[-1]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    bins = np.linspace(1.0 / k, 1.0, 31)
    axes[0].hist(
        probs.max(axis=-1).ravel(), bins=bins, density=True, alpha=0.6, label="single prior draw"
    )
    axes[0].hist(bma.max(axis=-1), bins=bins, density=True, alpha=0.6, label="prior BMA")
    axes[0].set_xlabel("max class probability")
    axes[0].set_ylabel("density over inputs (and draws)")
    axes[0].legend()
    share = np.bincount(probs.argmax(axis=-1).ravel(), minlength=k) / probs[..., 0].size
    axes[1].bar(np.arange(k) - 0.2, share, width=0.4, label="argmax share, single draws")
    axes[1].bar(np.arange(k) + 0.2, bma.mean(axis=0), width=0.4, label="mean BMA probability")
    axes[1].axhline(1.0 / k, color="k", lw=0.8, ls="--")
    axes[1].set_xlabel("class")
    axes[1].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, out)


def summarize_probs(probs: np.ndarray) -> dict[str, float]:
    """Mean max probability and entropy of single draws and of the prior BMA."""
    bma = probs.mean(axis=0)

    def entropy(p):
        return float(np.mean(-np.sum(p * np.log(np.clip(p, 1e-12, 1.0)), axis=-1)))

    return {
        "max_prob_single": float(probs.max(axis=-1).mean()),
        "max_prob_bma": float(bma.max(axis=-1).mean()),
        "entropy_single": entropy(probs),
        "entropy_bma": entropy(bma),
    }
