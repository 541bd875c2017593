"""Data augmentation for image batches on the device: random crop with padding and flip.

For each image independently (its own key from ``jax.random.split``):

1. pad 4 pixels of zeros on every side, (H, W) -> (H + 8, W + 8);
2. crop an H x W window at offsets (dy, dx) drawn uniformly from {0, ..., 8}^2;
3. mirror left-right with probability 1/2.

This is the standard CIFAR augmentation (He et al. 2016). Zeros are added in the input's own
units, so apply it to raw uint8 pixels (padding is black) or to normalised floats (padding is the
normalised value 0) as you prefer; dtype and shape are preserved.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

PAD = 4


def _one(key: jax.Array, image: jax.Array) -> jax.Array:
    height, width = image.shape[0], image.shape[1]
    key_y, key_x, key_flip = jax.random.split(key, 3)
    padded = jnp.pad(image, ((PAD, PAD), (PAD, PAD), (0, 0)))
    dy = jax.random.randint(key_y, (), 0, 2 * PAD + 1)
    dx = jax.random.randint(key_x, (), 0, 2 * PAD + 1)
    crop = jax.lax.dynamic_slice(padded, (dy, dx, 0), (height, width, image.shape[2]))
    flip = jax.random.bernoulli(key_flip)
    return jnp.where(flip, crop[:, ::-1, :], crop)


@jax.jit
def random_crop_flip(key: jax.Array, images: jax.Array) -> jax.Array:
    """Randomly crop (4-pixel zero padding) and horizontally flip each image of an NHWC batch.

    Args:
        key: a JAX PRNG key; the batch's randomness is a pure function of it.
        images: (N, H, W, C) array of any dtype (uint8 pixels or floats).

    Returns:
        An array of the same shape and dtype.

    Example:
        >>> key = jax.random.key(0)
        >>> batch = jnp.zeros((8, 32, 32, 3), jnp.uint8)
        >>> random_crop_flip(key, batch).shape
        (8, 32, 32, 3)
    """
    keys = jax.random.split(key, images.shape[0])
    return jax.vmap(_one)(keys, images)
