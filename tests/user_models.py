"""Flax networks as a user writes them in a module of their own (not in bnnkit's registry).

The tests import this module as ``user_models`` (``tests/`` is on the path), so a run made with
one of these classes records ``user_models:ClassName`` and another process with ``tests/`` on
its path rebuilds it.
"""

from __future__ import annotations

import flax.linen as nn
import jax


class SmallCNN(nn.Module):
    """A convolution, average pooling and a dense layer: ``(N, H, W, C) -> (N, num_outputs)``."""

    features: int = 4
    num_outputs: int = 3

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Conv(self.features, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        return nn.Dense(self.num_outputs)(x.reshape((x.shape[0], -1)))


class TinyMLP(nn.Module):
    """One hidden layer; ``num_outputs`` left to bnnkit (it sets what the likelihood needs)."""

    width: int = 8
    num_outputs: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.tanh(nn.Dense(self.width)(x.reshape((x.shape[0], -1))))
        return nn.Dense(self.num_outputs)(x)


class WithActivation(nn.Module):
    """A constructor argument that is a function, which ``run.json`` cannot hold."""

    activation: object = nn.relu

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(2)(self.activation(x))


NOT_A_MODULE = 3
