"""random_crop_flip: a padded crop or its mirror, per example, driven by the key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bnnkit.data.augment import random_crop_flip


def _candidates(image: np.ndarray) -> list[np.ndarray]:
    padded = np.pad(image, ((4, 4), (4, 4), (0, 0)))
    h, w = image.shape[:2]
    crops = [padded[dy : dy + h, dx : dx + w] for dy in range(9) for dx in range(9)]
    return crops + [c[:, ::-1] for c in crops]


def test_outputs_are_crops_or_flips_of_the_padded_input():
    rng = np.random.default_rng(0)
    images = rng.integers(1, 256, (6, 10, 10, 3), dtype=np.uint8)
    out = np.asarray(random_crop_flip(jax.random.key(0), jnp.asarray(images)))
    assert out.dtype == np.uint8 and out.shape == images.shape
    for image, result in zip(images, out, strict=True):
        assert any(np.array_equal(result, c) for c in _candidates(image))


def test_per_example_randomness_and_determinism():
    image = np.arange(10 * 10 * 1, dtype=np.float32).reshape(10, 10, 1) + 1
    batch = jnp.asarray(np.repeat(image[None], 16, axis=0))
    key = jax.random.key(3)
    out = np.asarray(random_crop_flip(key, batch))
    assert out.dtype == np.float32
    assert len({o.tobytes() for o in out}) > 4  # identical inputs, different augmentations
    np.testing.assert_array_equal(out, np.asarray(random_crop_flip(key, batch)))
    other = np.asarray(random_crop_flip(jax.random.key(4), batch))
    assert not np.array_equal(out, other)
