"""Multi-layer perceptrons and the linear model (no hidden layer).

Weights start from LeCun-normal (variance 1/fan_in), biases from zero, as in bnn_hmc's Haiku
models. Any input is flattened per example, so the MLPs also take images.

The ``*_dropout`` variants (MC dropout, Gal & Ghahramani 2016) drop each input of every Dense
layer, the network's inputs included, with probability p (``--dropout-rate``): Gal and
Ghahramani's ``W_i = M_i diag(z_i)`` for every layer i, as in their UCI networks. Their
parameters are those of the plain MLP, and without a key they are the plain MLP.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax

from bnnkit.models.registry import ModelSpec, register


class MLP(nn.Module):
    """``x -> [Dense(h) -> ReLU] * len(hidden) -> Dense(num_outputs)``.

    Attributes:
        hidden: widths of the hidden layers (empty for a linear model).
        num_outputs: width of the output layer.
        dropout_rate: p of dropout on the input of every Dense layer (0: none, the layer is
            left out).

    Example:
        >>> import jax.numpy as jnp
        >>> net = MLP(hidden=(50,), num_outputs=2)
        >>> params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 6)))
        >>> net.apply(params, jnp.zeros((4, 6))).shape
        (4, 2)
    """

    hidden: Sequence[int]
    num_outputs: int
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        x = x.reshape((x.shape[0], -1))
        for width in self.hidden:
            x = nn.relu(nn.Dense(width)(self._drop(x, deterministic)))
        return nn.Dense(self.num_outputs)(self._drop(x, deterministic))

    def _drop(self, x: jax.Array, deterministic: bool) -> jax.Array:
        if not self.dropout_rate:
            return x
        return nn.Dropout(self.dropout_rate, deterministic=deterministic)(x)


def _mlp(hidden: tuple[int, ...]):
    return lambda num_outputs: MLP(hidden=hidden, num_outputs=num_outputs)


def _mlp_dropout(hidden: tuple[int, ...]):
    return lambda num_outputs, rate: MLP(hidden=hidden, num_outputs=num_outputs, dropout_rate=rate)


DROPOUT = "dropout of rate --dropout-rate on the input of every layer (MC dropout)"


def _register(
    name: str, hidden: tuple[int, ...], tasks: tuple[str, ...], description: str, dropout: bool
) -> None:
    """Register an MLP of these hidden widths (with dropout: a dropout model)."""
    register(
        name,
        ModelSpec(
            make=_mlp_dropout(hidden) if dropout else _mlp(hidden),
            tasks=tasks,
            input_rank=None,
            description=description,
            stochastic=dropout,
            dropout=dropout,
        ),
    )


_REGRESSION, _CLASSIFICATION = ("regression",), ("classification",)

# name, hidden widths, tasks, one line for `bnnkit models`
for _row in (
    (
        "linear",
        (),
        ("regression", "classification"),
        "no hidden layer: Bayesian linear / logistic (softmax) regression",
    ),
    (
        "mlp_regression_small",
        (50,),
        _REGRESSION,
        "1 hidden layer of 50 ReLU units (bnn_hmc's UCI model)",
    ),
    (
        "mlp_regression_2x16",
        (16, 16),
        _REGRESSION,
        "2 hidden layers of 16 ReLU units (the tabular default of MILE, Sommer et al. 2025)",
    ),
    ("mlp_regression", (100, 100), _REGRESSION, "2 hidden layers of 100 ReLU units"),
    (
        "mlp_classification",
        (256, 256),
        _CLASSIFICATION,
        "2 hidden layers of 256 ReLU units (bnn_hmc's MNIST-subset model)",
    ),
    (
        "mlp_classification_small",
        (64, 64),
        _CLASSIFICATION,
        "2 hidden layers of 64 ReLU units (on 32x32x3 images about 200k weights, which a "
        "full-batch sampler steps through on a CPU as fast as mlp_classification's on MNIST)",
    ),
):
    _register(*_row, dropout=False)

for _name, _hidden, _tasks, _what in (
    ("mlp_regression_small", (50,), _REGRESSION, "1 hidden layer of 50 ReLU units"),
    ("mlp_regression", (100, 100), _REGRESSION, "2 hidden layers of 100 ReLU units"),
    ("mlp_classification", (256, 256), _CLASSIFICATION, "2 hidden layers of 256 ReLU units"),
):
    _register(f"{_name}_dropout", _hidden, _tasks, f"{_what}, {DROPOUT}", dropout=True)

# Blundell et al. (2015), "Weight Uncertainty in Neural Networks": the Bayes-by-Backprop MNIST
# networks, used in the paper to compare with its reported variational results.
for _width in (400, 800, 1200):
    _register(
        f"mlp_bbb_{_width}",
        (_width, _width),
        _CLASSIFICATION,
        f"2 hidden layers of {_width} ReLU units (Blundell et al.'s Bayes by Backprop)",
        dropout=False,
    )
