"""CIFAR-10-C-style corruptions (Hendrycks & Dietterich 2019) for any uint8 NHWC image batch.

Each corruption ``f`` maps pixels scaled to ``x in [0, 1]`` and a severity ``s in {1..5}`` to
``uint8(clip(f(x), 0, 1) * 255)`` (truncated, as ``np.uint8`` does in the reference script), with
the severity parameters of the CIFAR version of ``make_cifar_c.py``:

==================  =========================================================================
gaussian_noise      x + N(0, c^2),            c = 0.04, 0.06, 0.08, 0.09, 0.10
shot_noise          Poisson(x c) / c,         c = 500, 250, 100, 75, 50
impulse_noise       salt & pepper on a fraction c of values (half each), c = .01 .02 .03 .05 .07
speckle_noise       x + x N(0, c^2),          c = 0.06, 0.1, 0.12, 0.16, 0.2
gaussian_blur       Gaussian filter, sigma c = 0.4, 0.6, 0.7, 0.8, 1 (edges: nearest)
defocus_blur        disk kernel (radius r, anti-alias sigma a): (r, a) = (0.3, 0.4), (0.4, 0.5),
                    (0.5, 0.6), (1, 0.2), (1.5, 0.1) (edges: mirror)
zoom_blur           mean of x and centre zooms by 1, 1.01, ... up to 1.05/1.10/1.15/1.20/1.25
glass_blur          Gaussian blur sigma, 8-bit, then each pixel copied from a random neighbour up
                    to `delta` up/left, `passes` times, blur again: (sigma, delta, passes) =
                    (.05, 1, 1), (.25, 1, 1), (.4, 1, 1), (.25, 1, 2), (.4, 1, 2)
motion_blur         ImageMagick motion blur (radius, sigma) = (6, 1), (6, 1.5), (6, 2), (8, 2),
                    (9, 2.5) at an angle uniform in [-45, 45] degrees
snow                N(c1, c2) flakes zoomed by c3, cut below c4, motion-blurred (c5, c6) at an
                    angle in [-135, -45], added twice (once rotated 180 degrees) to
                    c7 x + (1 - c7) max(x, 1.5 gray(x) + 0.5): (c1..c7) = (.1, .2, 1, .6, 8, 3,
                    .95), (.1, .2, 1, .5, 10, 4, .9), (.15, .3, 1.75, .55, 10, 4, .9),
                    (.25, .3, 2.25, .6, 12, 6, .85), (.3, .3, 1.25, .65, 14, 12, .8)
spatter             N(c1, c2) liquid blurred by c3, cut below c4; severities 1-3: pale turquoise
                    water ripples (distance to the liquid's Canny edges, embossed) of strength c5;
                    4-5: brown mud where the liquid blurred by c5 exceeds 0.8: (c1..c5) =
                    (.62, .1, .7, .7, .5), (.65, .1, .8, .7, .5), (.65, .3, 1, .69, .5),
                    (.65, .1, .7, .69, .6), (.65, .1, .5, .68, .6)
contrast            (x - m) c + m with m the per-channel image mean, c = .75 .5 .4 .3 .15
brightness          HSV value + c,            c = .05, .1, .15, .2, .3
saturate            HSV saturation * a + b,   (a, b) = (0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1),
                    (2.5, 0.2)
fog                 (x + c1 plasma) max(x) / (max(x) + c1), (c1, decay) = (.2, 3), (.5, 3),
                    (.75, 2.5), (1, 2), (1.5, 1.75)
pixelate            box-downsample to c x size then box-upsample, c = .95 .9 .85 .75 .65
jpeg_compression    JPEG at quality 80, 65, 58, 50, 40 (Pillow)
elastic_transform   random affine (corner shifts up to c3) then a smooth displacement field of
                    amplitude c1 and smoothness c2, (c1, c2, c3) / 32 = (0, 0, .08),
                    (.05, .2, .07), (.08, .06, .06), (.1, .04, .05), (.1, .03, .03)
==================  =========================================================================

Pixel-unit parameters (elastic) are given for 32-pixel images and scale with the image size.
Grayscale (C = 1) images are handled as gray RGB where a colour space is needed. Not included:
frost (it needs the published frost photographs). The ImageMagick motion blur (of motion_blur and
snow's flakes) and the OpenCV steps of spatter (Canny edges, distance transform, histogram
equalisation, box blur, emboss filter) are numpy/scipy equivalents written in bnnkit
(:mod:`bnnkit.data.image_filters`); the distance transform is the exact Euclidean one where
OpenCV uses a 5 x 5 approximation of it. glass_blur reproduces what the published script does:
its pixel "swap" on NumPy views copies the neighbour instead. Results match the published recipe
but are not bit-identical to CIFAR-10-C, whose files were made with skimage/OpenCV/ImageMagick;
use :mod:`bnnkit.data.cifar10_c` for the published files.

Each corruption is one function of :mod:`bnnkit.data.corruption_recipes`; this module is their
registry (:data:`CORRUPTIONS`, :data:`SEVERITIES`) and :func:`corrupt`, which checks its
arguments, seeds the randomness and applies one of them to a batch in chunks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bnnkit.data import corruption_recipes as recipes
from bnnkit.data.image_filters import Rng
from bnnkit.errors import ConfigError

#: A corruption: pixels, a severity 1..5 and the generator of its randomness, to pixels.
Corruption = Callable[[np.ndarray, int, Rng], np.ndarray]

_FLOAT_CORRUPTIONS: dict[str, Corruption] = {
    "gaussian_noise": recipes.gaussian_noise,
    "shot_noise": recipes.shot_noise,
    "impulse_noise": recipes.impulse_noise,
    "speckle_noise": recipes.speckle_noise,
    "defocus_blur": recipes.defocus_blur,
    "gaussian_blur": recipes.gaussian_blur,
    "zoom_blur": recipes.zoom_blur,
    "glass_blur": recipes.glass_blur,
    "motion_blur": recipes.motion_blur,
    "snow": recipes.snow,
    "spatter": recipes.spatter,
    "fog": recipes.fog,
    "brightness": recipes.brightness,
    "contrast": recipes.contrast,
    "saturate": recipes.saturate,
    "elastic_transform": recipes.elastic_transform,
}
_UINT8_CORRUPTIONS: dict[str, Corruption] = {
    "pixelate": recipes.pixelate_uint8,
    "jpeg_compression": recipes.jpeg_uint8,
}

CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "defocus_blur",
    "gaussian_blur",
    "zoom_blur",
    "glass_blur",
    "motion_blur",
    "snow",
    "spatter",
    "fog",
    "brightness",
    "contrast",
    "saturate",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
SEVERITIES = (1, 2, 3, 4, 5)


def _seed_from_key(key) -> np.random.SeedSequence:
    import jax

    data = key
    if jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
        data = jax.random.key_data(key)
    return np.random.SeedSequence([int(v) for v in np.asarray(data).ravel()])


def corrupt(
    images: np.ndarray,
    name: str,
    severity: int,
    *,
    seed: int | None = None,
    key=None,
    chunk_size: int = 500,
) -> np.ndarray:
    """Apply one corruption at one severity to a uint8 image batch.

    Args:
        images: (N, H, W, C) or (H, W, C) uint8 pixels, C = 1 or 3.
        name: one of :data:`CORRUPTIONS`.
        severity: 1 (mild) to 5 (strong).
        seed: integer seed of the corruption's randomness; or
        key: a JAX PRNG key instead of ``seed`` (exactly one of the two).
        chunk_size: images processed at a time (bounds the float32 working memory).

    Returns:
        uint8 array of the input's shape; deterministic for a fixed seed/key and chunk size.

    Raises:
        ConfigError: unknown name, severity outside 1..5, wrong dtype/shape, or not exactly one
            of seed/key.

    Example:
        >>> batch = np.full((2, 32, 32, 3), 128, np.uint8)
        >>> out = corrupt(batch, "gaussian_noise", 3, seed=0)
        >>> out.dtype, out.shape
        (dtype('uint8'), (2, 32, 32, 3))
    """
    if name not in CORRUPTIONS:
        raise ConfigError(f"unknown corruption {name!r}; allowed: {', '.join(CORRUPTIONS)}")
    if severity not in SEVERITIES:
        raise ConfigError(f"severity {severity!r} out of range; allowed: 1, 2, 3, 4, 5")
    if (seed is None) == (key is None):
        raise ConfigError(
            "corrupt needs exactly one of seed= or key=; got "
            f"{'both' if seed is not None else 'neither'}"
        )
    images = np.asarray(images)
    single = images.ndim == 3
    batch = images[None] if single else images
    if batch.dtype != np.uint8 or batch.ndim != 4 or batch.shape[-1] not in (1, 3):
        raise ConfigError(
            f"images have dtype {images.dtype} and shape {images.shape}; allowed: "
            "uint8 (N, H, W, C) or (H, W, C) with C = 1 or 3"
        )
    rng = np.random.default_rng(seed if key is None else _seed_from_key(key))
    out = np.empty_like(batch)
    for start in range(0, batch.shape[0], chunk_size):
        part = batch[start : start + chunk_size]
        if name in _UINT8_CORRUPTIONS:
            out[start : start + len(part)] = _UINT8_CORRUPTIONS[name](part, severity, rng)
            continue
        result = _FLOAT_CORRUPTIONS[name](part.astype(np.float32) / 255.0, severity, rng)
        # np.uint8 truncation as in the reference script; 1e-3 absorbs float32 round-off so an
        # untouched pixel keeps its value.
        out[start : start + len(part)] = (np.clip(result, 0, 1) * 255.0 + 1e-3).astype(np.uint8)
    return out[0] if single else out
