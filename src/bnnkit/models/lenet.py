"""LeNet-5 (LeCun et al., 1998) for small NHWC images, with ReLU and max pooling.

Layout, for a 32×32×C image (the original input size)::

    conv 6@5×5 VALID → ReLU → max-pool 2×2    32×32 → 28×28 → 14×14
    conv 16@5×5 VALID → ReLU → max-pool 2×2   14×14 → 10×10 → 5×5
    flatten (400) → Dense 120 → ReLU → Dense 84 → ReLU → Dense num_outputs

A 28×28 image (MNIST, Fashion-MNIST) gets SAME padding (2 pixels a side) on the first
convolution, so it also reaches 28×28 there and the rest of the network, including the 400
features fed to the dense layers, is identical. Weights start from LeCun-normal, biases from zero,
as in :mod:`bnnkit.models.mlp`.

``lenet5_dropout`` (MC dropout, Gal & Ghahramani 2016) drops each input of every layer with
probability p (``--dropout-rate``): the image's pixels, the pooled feature maps (element-wise)
and the dense layers' inputs; its parameters are LeNet-5's.

Parameter count for C input channels and K outputs::

    (25·C·6 + 6) + (25·6·16 + 16) + (400·120 + 120) + (120·84 + 84) + (84·K + K)
    = 150·C + 60 706 + 85·K          (61 706 for MNIST, 62 006 for CIFAR-10)
"""

from __future__ import annotations

import flax.linen as nn
import jax

from bnnkit.models.registry import ModelSpec, register


class LeNet5(nn.Module):
    """Classic LeNet-5 on ``(batch, H, W, C)`` images.

    The first convolution uses SAME padding when the image is smaller than 32×32 (so a 28×28
    image keeps its size there, as in the usual MNIST variant) and VALID padding otherwise.

    Attributes:
        num_outputs: width of the output layer (number of classes).
        dropout_rate: p of dropout on the input of every layer (0: none).

    Example:
        >>> import jax.numpy as jnp
        >>> from bnnkit.models.registry import num_params
        >>> net = LeNet5(num_outputs=10)
        >>> x = jnp.zeros((4, 28, 28, 1))
        >>> params = jax.eval_shape(net.init, jax.random.PRNGKey(0), x)  # shapes only
        >>> jax.eval_shape(net.apply, params, x).shape, num_params(params)  # 150 + 60 706 + 850
        ((4, 10), 61706)
    """

    num_outputs: int
    dropout_rate: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        def drop(h: jax.Array) -> jax.Array:
            if not self.dropout_rate:
                return h
            return nn.Dropout(self.dropout_rate, deterministic=deterministic)(h)

        first_padding = "SAME" if min(x.shape[1], x.shape[2]) < 32 else "VALID"
        x = nn.relu(nn.Conv(6, kernel_size=(5, 5), padding=first_padding)(drop(x)))
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(16, kernel_size=(5, 5), padding="VALID")(drop(x)))
        x = nn.max_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(120)(drop(x)))
        x = nn.relu(nn.Dense(84)(drop(x)))
        return nn.Dense(self.num_outputs)(drop(x))


register(
    "lenet5",
    ModelSpec(
        make=lambda num_outputs: LeNet5(num_outputs=num_outputs),
        tasks=("classification",),
        input_rank=3,
        description="LeNet-5: 2 conv (6, 16 @5×5) + max-pool, dense 120-84, ReLU",
        example_shape=(28, 28, 1),
    ),
)
register(
    "lenet5_dropout",
    ModelSpec(
        make=lambda num_outputs, rate: LeNet5(num_outputs=num_outputs, dropout_rate=rate),
        tasks=("classification",),
        input_rank=3,
        description="LeNet-5 with dropout of rate --dropout-rate on the input of every layer (MC "
        "dropout)",
        example_shape=(28, 28, 1),
        stochastic=True,
        dropout=True,
    ),
)
