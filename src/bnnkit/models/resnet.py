"""ResNet-20 for CIFAR with Filter Response Normalisation instead of BatchNorm.

BatchNorm makes an example's output depend on the rest of its batch, so the likelihood would not
factorise over examples and HMC would not target a posterior. Filter Response Normalisation
(Singh & Krishnan, 2020) normalises each example on its own. The layout follows bnn_hmc's
``make_resnet_fn`` (the networks of Izmailov et al., 2021):

    layer(x)  = act(FRN(conv(x)))                   # conv: 3×3, SAME, with bias, He-normal
    stem      = layer(image)                        # 16 channels
    block(x)  = act(x' + FRN(conv(layer(x))))       # x' = x, or FRN(conv1×1, stride 2)(x)
    3 stages × 3 blocks with 16, 32, 64 channels; the first block of stages 2 and 3 has
    stride 2 and the 1×1 projection shortcut
    head      = Dense(num_outputs)(mean over H, W)  # He-normal

``act`` is ReLU for ``resnet20_frn`` and swish ``x·σ(x)`` for ``resnet20_frn_swish``. As in
bnn_hmc, FRN keeps its own thresholded linear unit (TLU) in every position, including the
second convolution of a block and the shortcut, where no activation follows.

Parameter count with 3 input channels and K outputs (each conv has a bias, each FRN has
γ, β, τ per channel)::

    stem              3·3·3·16 + 16 + 3·16                                  =     496
    stage 1 (16 ch)   6 × (3·3·16·16 + 16 + 3·16)                           =  14 208
    stage 2 (32 ch)   (3·3·16·32 + 32) + (16·32 + 32) + 5·(3·3·32·32 + 32)
                      + 7 FRN · 3·32                                        =  52 096
    stage 3 (64 ch)   (3·3·32·64 + 64) + (32·64 + 64) + 5·(3·3·64·64 + 64)
                      + 7 FRN · 3·64                                        = 206 592
    head              64·K + K                                              =  65·K

    total = 273 392 + 65·K  (274 042 ≈ 0.27 M for CIFAR-10)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax.linen.dtypes import promote_dtype

from bnnkit.models.registry import ModelSpec, register

# He et al. (2015): variance 2 / fan_in (truncated normal), as bnn_hmc's ``he_normal``.
he_normal = nn.initializers.he_normal()


class FilterResponseNorm(nn.Module):
    """Filter Response Normalisation with its thresholded linear unit, on NHWC inputs.

    For each example and channel c, over the spatial positions (h, w)::

        ν²  = mean_{h,w} x²
        x̂   = x / sqrt(ν² + ε)
        out = max(γ_c x̂ + β_c, τ_c)

    with learned γ (init 1), β and τ (init 0). No statistic is shared between examples.

    Attributes:
        eps: ε, keeps the division finite for an all-zero channel.
        param_dtype: dtype of γ, β, τ when created.

    Example:
        >>> frn = FilterResponseNorm()
        >>> params = frn.init(jax.random.PRNGKey(0), jnp.ones((2, 4, 4, 3)))
        >>> frn.apply(params, jnp.ones((2, 4, 4, 3))).shape
        (2, 4, 4, 3)
    """

    eps: float = 1e-6
    param_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        shape = (1, 1, 1, x.shape[-1])
        gamma = self.param("gamma", nn.initializers.ones_init(), shape, self.param_dtype)
        beta = self.param("beta", nn.initializers.zeros_init(), shape, self.param_dtype)
        tau = self.param("tau", nn.initializers.zeros_init(), shape, self.param_dtype)
        x, gamma, beta, tau = promote_dtype(x, gamma, beta, tau)
        nu2 = jnp.mean(jnp.square(x), axis=(1, 2), keepdims=True)
        x = x * jax.lax.rsqrt(nu2 + self.eps)
        return jnp.maximum(gamma * x + beta, tau)


class ResNet20FRN(nn.Module):
    """ResNet-20 (He et al., 2016, CIFAR variant) with FRN; see the module docstring.

    Attributes:
        num_outputs: width of the output layer (number of classes).
        activation: elementwise nonlinearity after the stem, the first conv of each block and
            each residual sum (``jax.nn.relu`` or ``jax.nn.swish``).
        width: channels of the first stage; the second and third have 2× and 4× as many.
        blocks_per_stage: 3 for ResNet-20 (depth = 6·blocks + 2).

    Example:
        >>> net = ResNet20FRN(num_outputs=10, activation=jax.nn.swish)
        >>> x = jnp.zeros((2, 32, 32, 3))
        >>> params = jax.eval_shape(net.init, jax.random.PRNGKey(0), x)  # shapes only
        >>> jax.eval_shape(net.apply, params, x).shape
        (2, 10)
    """

    num_outputs: int
    activation: Callable[[jax.Array], jax.Array] = jax.nn.relu
    width: int = 16
    blocks_per_stage: int = 3

    def _layer(
        self,
        x: jax.Array,
        channels: int,
        *,
        kernel: int = 3,
        stride: int = 1,
        activation: Callable[[jax.Array], jax.Array] | None = None,
    ) -> jax.Array:
        x = nn.Conv(
            channels,
            kernel_size=(kernel, kernel),
            strides=(stride, stride),
            padding="SAME",
            kernel_init=he_normal,
        )(x)
        x = FilterResponseNorm()(x)
        return x if activation is None else activation(x)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = self.activation
        channels = self.width
        x = self._layer(x, channels, activation=act)
        for stage in range(3):
            for block in range(self.blocks_per_stage):
                downsample = stage > 0 and block == 0
                stride = 2 if downsample else 1
                y = self._layer(x, channels, stride=stride, activation=act)
                y = self._layer(y, channels)
                if downsample:
                    # Projection shortcut: the residual changes size and width here.
                    x = self._layer(x, channels, kernel=1, stride=stride)
                x = act(x + y)
            channels *= 2
        # Global average pooling: bnn_hmc's 8×8 average pool on a 32×32 input.
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)


def _resnet20_frn(activation: Callable[[jax.Array], jax.Array]):
    return lambda num_outputs: ResNet20FRN(num_outputs=num_outputs, activation=activation)


for _name, _activation, _description in (
    (
        "resnet20_frn_swish",
        jax.nn.swish,
        "ResNet-20 with filter response norm and swish (the paper's CIFAR model)",
    ),
    ("resnet20_frn", jax.nn.relu, "ResNet-20 with filter response norm and ReLU"),
):
    register(
        _name,
        ModelSpec(
            make=_resnet20_frn(_activation),
            tasks=("classification",),
            input_rank=3,
            description=_description,
            example_shape=(32, 32, 3),
        ),
    )
