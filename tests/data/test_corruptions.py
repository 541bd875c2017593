"""Corruptions: stronger severities move images further; dtype, range, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import ndimage

from bnnkit.data.corruptions import CORRUPTIONS, corrupt
from bnnkit.data.image_filters import (
    canny,
    disk_kernel,
    equalize_hist,
    motion_blur_images,
    motion_kernel,
)
from bnnkit.errors import ConfigError


def natural_like(n: int = 12, size: int = 32, channels: int = 3, seed: int = 0) -> np.ndarray:
    """Smooth colour fields with sharp-edged rectangles: both textures corruptions act on."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(30, 225, (n, size // 4, size // 4, channels))
    images = ndimage.zoom(coarse, (1, 4, 4, 1), order=1)
    for i in range(n):
        top, left = rng.integers(2, size // 2, 2)
        images[i, top : top + size // 3, left : left + size // 3] = rng.uniform(0, 255, channels)
    return np.clip(images, 0, 255).astype(np.uint8)


IMAGES = natural_like()


def _distance(name: str, severity: int, images: np.ndarray = IMAGES) -> float:
    out = corrupt(images, name, severity, seed=1)
    return float(np.abs(out.astype(np.float64) - images).mean())


# Published CIFAR-10-C parameters that do not grow monotonically with severity:
# saturate desaturates at severities 1-2 (x0.3, x0.1) and over-saturates at 3-5, and
# elastic_transform trades a shrinking random affine (2.56 -> 0.96 px) for a growing elastic field;
# glass_blur shuffles pixels once at severities 1-3 (blur sigma .05, .25, .4 barely matters next to
# it) and twice at 4-5; motion_blur's severities 3 and 4 share sigma 2, their radii 6 and 8 only
# cut taps of weight < 1e-7; spatter is water at 1-3 and mud at 4-5.
NON_MONOTONE = {"saturate", "elastic_transform", "glass_blur", "motion_blur", "spatter"}


@pytest.mark.parametrize("name", [n for n in CORRUPTIONS if n not in NON_MONOTONE])
def test_stronger_severity_moves_further(name):
    distances = [_distance(name, s) for s in range(1, 6)]
    assert all(a < b for a, b in itertools.pairwise(distances)), distances
    assert distances[0] > 0


def test_non_monotone_published_parameters():
    sat = [_distance("saturate", s) for s in range(1, 6)]
    assert sat[0] < sat[1] and sat[2] < sat[3] < sat[4]
    elastic = [_distance("elastic_transform", s) for s in range(1, 6)]
    assert min(elastic) > 1.0  # every severity visibly moves the image
    glass = [_distance("glass_blur", s) for s in range(1, 6)]
    assert max(glass[:3]) < min(glass[3:]) and min(glass) > 1.0
    motion = [_distance("motion_blur", s) for s in range(1, 6)]
    assert motion[0] < motion[1] < motion[2] < motion[4] and motion[3] < motion[4]
    assert motion[3] == pytest.approx(motion[2], abs=0.01)  # same sigma, same angles
    spatter = [_distance("spatter", s) for s in range(1, 6)]
    assert spatter[0] < spatter[1] < spatter[2] and spatter[3] < spatter[4]


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_dtype_shape_range_and_determinism(name):
    images = IMAGES[:4]
    first = corrupt(images, name, 3, seed=7)
    assert first.dtype == np.uint8 and first.shape == images.shape
    np.testing.assert_array_equal(first, corrupt(images, name, 3, seed=7))
    gray = corrupt(images[..., :1], name, 5, seed=0)
    assert gray.shape == (4, 32, 32, 1) and gray.dtype == np.uint8
    single = corrupt(images[0], name, 2, seed=3)
    assert single.shape == (32, 32, 3)


def test_seed_changes_random_corruptions_and_key_is_accepted():
    a = corrupt(IMAGES, "gaussian_noise", 2, seed=0)
    assert not np.array_equal(a, corrupt(IMAGES, "gaussian_noise", 2, seed=1))
    import jax

    k1 = corrupt(IMAGES, "shot_noise", 2, key=jax.random.key(5))
    k2 = corrupt(IMAGES, "shot_noise", 2, key=jax.random.PRNGKey(5))
    np.testing.assert_array_equal(k1, k2)


def test_deterministic_corruption_keeps_untouched_pixels():
    flat = np.full((1, 8, 8, 3), 77, np.uint8)
    np.testing.assert_array_equal(corrupt(flat, "contrast", 5, seed=0), flat)
    np.testing.assert_array_equal(corrupt(flat, "gaussian_blur", 5, seed=0), flat)


def test_defocus_kernel_is_normalised_disk():
    for radius, blur in [(0.3, 0.4), (1, 0.2), (1.5, 0.1)]:
        kernel = disk_kernel(radius, blur)
        assert kernel.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(kernel, kernel.T)
        np.testing.assert_allclose(kernel, kernel[::-1, ::-1])


def test_bad_arguments():
    with pytest.raises(ConfigError, match="unknown corruption 'fogg'"):
        corrupt(IMAGES, "fogg", 1, seed=0)
    with pytest.raises(ConfigError, match="severity 6"):
        corrupt(IMAGES, "fog", 6, seed=0)
    with pytest.raises(ConfigError, match="exactly one of seed= or key="):
        corrupt(IMAGES, "fog", 1)
    with pytest.raises(ConfigError, match="dtype float"):
        corrupt(IMAGES.astype(np.float32), "fog", 1, seed=0)


def test_motion_blur_streaks_along_its_angle_and_keeps_flat_images():
    distances, weights = motion_kernel(6, 1)
    assert len(distances) == 13 and weights.sum() == pytest.approx(1.0)
    assert np.all(np.diff(weights) < 0)  # one-sided: the pixel itself weighs most
    image = np.zeros((2, 9, 9, 1))
    image[:, 4, 4] = 1.0
    out = motion_blur_images(image, 3, 1.0, np.array([0.0, 90.0]))
    # angle 0 reads pixels to the right, so the dot streaks left along its row; 90: upwards
    assert out[0, 4, :4, 0].sum() > 0 and out[0, :, :, 0].sum(axis=1)[[3, 5]].sum() == 0
    assert out[1, :4, 4, 0].sum() > 0 and out[1, :, :, 0].sum(axis=0)[[3, 5]].sum() == 0
    flat = np.full((1, 8, 8, 3), 91, np.uint8)
    np.testing.assert_array_equal(corrupt(flat, "motion_blur", 5, seed=0), flat)


def test_canny_and_equalize_hist_follow_opencv():
    square = np.zeros((1, 12, 12), np.uint8)
    square[:, 3:9, 3:9] = 200
    edges = canny(square, 50, 150)[0]
    # one closed, thin outline: it encloses the square's inside and nothing inside is an edge
    # (OpenCV keeps ties on the right/lower side, so the ring is outside on the left/top)
    assert ndimage.binary_fill_holes(edges)[4:8, 4:8].all() and not edges[4:8, 4:8].any()
    assert edges.sum() < 6 * 4 + 4 and edges[2:9, 2:9].sum() == edges.sum()
    assert not canny(square // 10, 50, 150).any()  # a weak step stays below the thresholds
    flat = np.full((1, 4, 4), 7, np.uint8)
    np.testing.assert_array_equal(equalize_hist(flat), flat)
    ramp = equalize_hist(np.arange(16, dtype=np.uint8).reshape(1, 4, 4))
    assert ramp.min() == 0 and ramp.max() == 255 and np.all(np.diff(ramp.ravel()) > 0)
