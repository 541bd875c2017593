"""A network of your own: any Flax module, in a module that Python can import.

Keeping the class in a module (not in the script that trains it) lets a run record it by its
import path, ``my_models:SmallCNN``, so the run can be evaluated in another process, or from
the shell with ``bnnkit evaluate``, with this folder on the Python path.
"""

from __future__ import annotations

import flax.linen as nn
import jax


class SmallCNN(nn.Module):
    """A convolution, average pooling and a dense layer: ``(N, H, W, C) -> (N, num_outputs)``.

    bnnkit sets ``num_outputs`` to what the likelihood needs (the number of classes) when a
    run rebuilds the module from its import path; pass it yourself when you build one.
    """

    features: int = 8
    num_outputs: int = 3

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(nn.Conv(self.features, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        return nn.Dense(self.num_outputs)(x.reshape((x.shape[0], -1)))
