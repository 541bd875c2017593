"""Observation models ``p(y | f(x; θ))`` as per-example log densities of network outputs.

Each likelihood says how many network outputs it needs, gives ``log_prob(outputs, y)`` per
example (never summed or tempered here: :mod:`bnnkit.log_posterior` does that once), and how to
read a predictive distribution off the outputs.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from bnnkit.errors import ConfigError

# Keeps a heteroscedastic std away from exactly zero, where the density is undefined: the floor
# of a problem that sets none (``ProblemConfig.min_noise_std`` left at ``None``).
MIN_STD = 1e-6


@dataclasses.dataclass(frozen=True)
class Gaussian:
    """Gaussian regression likelihood.

    With ``noise_std=None`` (heteroscedastic, bnn_hmc's form) the network has two outputs, a mean
    and the inverse softplus of the std: ``σ(x) = min_std + softplus(f₂(x))``. With a fixed
    ``noise_std`` it has one output, the mean, and ``σ`` is that constant (in the units of the
    targets the model sees, i.e. standardised units for the UCI sets).

        log p(y | f) = -½ ((y - μ)/σ)² - log σ - ½ log 2π

    ``min_std`` is the heteroscedastic std's floor, in the same units: the default
    :data:`MIN_STD` only keeps σ off zero, while a floor at a fraction of the targets' spread
    bounds the ``-log σ`` a network can gain by passing through its training points, so the
    posterior cannot sharpen without end.

    Example:
        >>> outputs = jnp.array([[0.0, -30.0]])
        >>> float(Gaussian().mean_std(outputs)[1][0]) < 1e-5
        True
        >>> round(float(Gaussian(min_std=0.05).mean_std(outputs)[1][0]), 6)
        0.05
    """

    noise_std: float | None = None
    task: str = "regression"
    min_std: float = MIN_STD

    @property
    def name(self) -> str:
        return "gaussian"

    @property
    def num_outputs(self) -> int:
        return 2 if self.noise_std is None else 1

    def mean_std(self, outputs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Predictive mean and std per example from raw network outputs (batch, outputs)."""
        mean = outputs[..., 0]
        if self.noise_std is None:
            std = jax.nn.softplus(outputs[..., 1]) + self.min_std
        else:
            std = jnp.full_like(mean, self.noise_std)
        return mean, std

    def log_prob(self, outputs: jax.Array, y: jax.Array) -> jax.Array:
        mean, std = self.mean_std(outputs)
        z = (y - mean) / std
        return -0.5 * z**2 - jnp.log(std) - 0.5 * math.log(2 * math.pi)


@dataclasses.dataclass(frozen=True)
class Categorical:
    """Softmax classification likelihood: ``log p(y | f) = log_softmax(f)[y]``."""

    num_classes: int
    task: str = "classification"

    @property
    def name(self) -> str:
        return "categorical"

    @property
    def num_outputs(self) -> int:
        return self.num_classes

    def probs(self, outputs: jax.Array) -> jax.Array:
        return jax.nn.softmax(outputs, axis=-1)

    def log_prob(self, outputs: jax.Array, y: jax.Array) -> jax.Array:
        log_probs = jax.nn.log_softmax(outputs, axis=-1)
        return jnp.take_along_axis(log_probs, y[..., None].astype(jnp.int32), axis=-1)[..., 0]


Likelihood = Gaussian | Categorical
LIKELIHOODS = ("gaussian", "categorical")


def make(
    name: str | None,
    *,
    task: str,
    num_classes: int | None,
    noise_std: float | None,
    min_std: float | None = None,
) -> Likelihood:
    """Build a likelihood by name, defaulting from the task.

    Args:
        name: ``"gaussian"``, ``"categorical"`` or ``None`` (by task).
        task: ``"regression"`` or ``"classification"``.
        num_classes: classes of a classification dataset.
        noise_std: a fixed Gaussian noise std; ``None``: the network outputs its std.
        min_std: the floor of a network's std (``None``: :data:`MIN_STD`); only for the
            heteroscedastic Gaussian.

    Raises:
        ConfigError: unknown name, a name that does not fit the task, ``noise_std <= 0``,
            ``min_std <= 0``, or a ``min_std`` where the network outputs no std.

    Example:
        >>> make("gaussian", task="regression", num_classes=None, noise_std=0.5).num_outputs
        1
        >>> make(None, task="regression", num_classes=None, noise_std=None, min_std=0.05)
        Gaussian(noise_std=None, task='regression', min_std=0.05)
    """
    name = name or ("gaussian" if task == "regression" else "categorical")
    if name not in LIKELIHOODS:
        raise ConfigError(f"unknown likelihood {name!r}; allowed: {', '.join(LIKELIHOODS)}")
    if name == "gaussian":
        if task != "regression":
            raise ConfigError(f"likelihood 'gaussian' needs a regression dataset, not {task}")
        if noise_std is not None and not noise_std > 0:
            raise ConfigError(f"noise std {noise_std} must be > 0")
        if min_std is None:
            return Gaussian(noise_std=noise_std)
        if not min_std > 0:
            raise ConfigError(f"--min-noise-std {min_std} must be > 0")
        if noise_std is not None:
            raise ConfigError(
                f"--min-noise-std {min_std} is the floor of the std the network outputs; "
                f"with --noise-std {noise_std} there is none: give one or the other"
            )
        return Gaussian(noise_std=None, min_std=min_std)
    if task != "classification" or num_classes is None:
        raise ConfigError(f"likelihood 'categorical' needs a classification dataset, not {task}")
    if min_std is not None:
        raise ConfigError("--min-noise-std applies to the gaussian likelihood only")
    if noise_std is not None:
        raise ConfigError("--noise-std applies to the gaussian likelihood only")
    return Categorical(num_classes=num_classes)
