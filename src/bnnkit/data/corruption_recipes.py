"""The corruptions themselves: one function per corruption, with its five severities' parameters.

Each ``f(x, severity, rng)`` takes a batch of float pixels ``x`` in [0, 1] (pixelate and JPEG:
uint8 pixels, as Pillow takes them) and returns the corrupted batch, unclipped; the parameters
of severities 1 to 5 are those of the CIFAR version of ``make_cifar_c.py``, listed in
:mod:`bnnkit.data.corruptions`, which names, checks, chunks and quantises them
(:func:`~bnnkit.data.corruptions.corrupt`). Kept apart from that registry so each recipe reads
beside the others, and from the image operations they are made of
(:mod:`bnnkit.data.image_filters`).
"""

from __future__ import annotations

import io

import numpy as np
from scipy import ndimage

from bnnkit.data.image_filters import (
    Rng,
    box3,
    canny,
    clipped_zoom,
    disk_kernel,
    equalize_hist,
    gray,
    in_channels,
    in_hsv,
    motion_blur_images,
    pil_each,
    plasma_fractal,
)


def gaussian_noise(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [0.04, 0.06, 0.08, 0.09, 0.10][severity - 1]
    return x + rng.normal(scale=c, size=x.shape).astype(np.float32)


def shot_noise(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [500, 250, 100, 75, 50][severity - 1]
    return (rng.poisson(x * c) / c).astype(np.float32)


def impulse_noise(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [0.01, 0.02, 0.03, 0.05, 0.07][severity - 1]
    flipped = rng.random(x.shape) < c
    salted = rng.random(x.shape) < 0.5
    out = x.copy()
    out[flipped & salted] = 1.0
    out[flipped & ~salted] = 0.0
    return out


def speckle_noise(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [0.06, 0.1, 0.12, 0.16, 0.2][severity - 1]
    return x + x * rng.normal(scale=c, size=x.shape).astype(np.float32)


def gaussian_blur(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [0.4, 0.6, 0.7, 0.8, 1.0][severity - 1]
    return ndimage.gaussian_filter(x, sigma=(0, c, c, 0), mode="nearest", truncate=4.0)


def defocus_blur(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    radius, alias = [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)][severity - 1]
    kernel = disk_kernel(radius, alias).astype(np.float32)
    return ndimage.correlate(x, kernel[None, :, :, None], mode="mirror")


def zoom_blur(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    factors = [
        np.arange(1, 1.06, 0.01),
        np.arange(1, 1.11, 0.01),
        np.arange(1, 1.16, 0.01),
        np.arange(1, 1.21, 0.01),
        np.arange(1, 1.26, 0.01),
    ][severity - 1]
    out = np.zeros_like(x)
    for factor in factors:
        out += clipped_zoom(x, float(factor))
    return (x + out) / (len(factors) + 1)


def contrast(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [0.75, 0.5, 0.4, 0.3, 0.15][severity - 1]
    means = x.mean(axis=(1, 2), keepdims=True)
    return (x - means) * c + means


def brightness(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    c = [0.05, 0.1, 0.15, 0.2, 0.3][severity - 1]

    def change(hsv: np.ndarray) -> None:
        hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)

    return in_hsv(x, change)


def saturate(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    scale, shift = [(0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)][severity - 1]

    def change(hsv: np.ndarray) -> None:
        hsv[..., 1] = np.clip(hsv[..., 1] * scale + shift, 0, 1)

    return in_hsv(x, change)


def fog(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    strength, decay = [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)][severity - 1]
    height, width = x.shape[1], x.shape[2]
    mapsize = max(32, 1 << int(np.ceil(np.log2(max(height, width)))))
    max_val = x.max(axis=(1, 2, 3), keepdims=True)
    fogs = np.stack([plasma_fractal(rng, mapsize, decay)[:height, :width] for _ in x])
    out = x + strength * fogs[..., None].astype(np.float32)
    return out * max_val / (max_val + strength)


def pixelate_uint8(images: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    from PIL import Image

    c = [0.95, 0.9, 0.85, 0.75, 0.65][severity - 1]
    height, width = images.shape[1], images.shape[2]
    small = (int(width * c), int(height * c))
    return pil_each(
        images, lambda im: im.resize(small, Image.BOX).resize((width, height), Image.BOX)
    )


def jpeg_uint8(images: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    from PIL import Image

    quality = [80, 65, 58, 50, 40][severity - 1]

    def compress(image):
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=quality)
        buffer.seek(0)
        with Image.open(buffer) as decoded:
            decoded.load()
            return decoded.copy()

    return pil_each(images, compress)


def elastic_transform(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    n, height, width, channels = x.shape
    size = min(height, width)
    alpha, sigma, shift = (
        size * v
        for v in [
            (0, 0, 0.08),
            (0.05, 0.2, 0.07),
            (0.08, 0.06, 0.06),
            (0.1, 0.04, 0.05),
            (0.1, 0.03, 0.03),
        ][severity - 1]
    )
    # 1. random affine: three points (x, y) around the centre move by up to `shift` pixels; the
    # output pixel (x, y) samples the input at the inverse map (OpenCV warpAffine semantics).
    centre, square = np.array([width // 2, height // 2], np.float64), size // 3
    pts1 = np.array([centre + square, [centre[0] + square, centre[1] - square], centre - square])
    pts2 = pts1[None] + rng.uniform(-shift, shift, size=(n, 3, 2))
    homogeneous = np.concatenate([pts2, np.ones((n, 3, 1))], axis=2)  # solve dst -> src
    inverse = np.linalg.solve(homogeneous, np.broadcast_to(pts1, (n, 3, 2)))  # (n, 3, 2)
    idx, rows, cols, chans = np.meshgrid(
        np.arange(n), np.arange(height), np.arange(width), np.arange(channels), indexing="ij"
    )
    a = inverse[:, None, None, None, :, :]
    src_x = cols * a[..., 0, 0] + rows * a[..., 1, 0] + a[..., 2, 0]
    src_y = cols * a[..., 0, 1] + rows * a[..., 1, 1] + a[..., 2, 1]
    warped = ndimage.map_coordinates(x, [idx, src_y, src_x, chans], order=1, mode="mirror")
    # 2. elastic field: smoothed uniform noise of amplitude alpha.
    fields = rng.uniform(-1, 1, size=(2, n, height, width))
    fields = (
        ndimage.gaussian_filter(fields, sigma=(0, 0, sigma, sigma), mode="reflect", truncate=3.0)
        * alpha
    )
    dx, dy = fields[0][..., None], fields[1][..., None]
    return ndimage.map_coordinates(
        warped, [idx, rows + dy, cols + dx, chans], order=1, mode="reflect"
    ).astype(np.float32)


def glass_blur(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    sigma, delta, iterations = [(0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2)][
        severity - 1
    ]
    n, height, width, _ = x.shape
    blurred = ndimage.gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0)
    pixels = (np.clip(blurred, 0, 1) * 255.0 + 1e-3).astype(np.uint8)  # np.uint8, as published
    # The published loop visits h, w from the bottom right (H - delta ... delta + 1) and runs
    # ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` on NumPy views, which copies x[h', w'] into
    # x[h, w] rather than swapping. With (dy, dx) = randint(-delta, delta) (upper bound
    # exclusive) every source lies up/left of the pixel, not yet visited, so each pass is one
    # gather of the unmoved image.
    rows = np.arange(delta + 1, height - delta + 1)
    cols = np.arange(delta + 1, width - delta + 1)
    index = np.arange(n)[:, None, None]
    for _ in range(iterations):
        shifts = rng.integers(-delta, delta, size=(2, n, len(rows), len(cols)))
        source = pixels[index, rows[None, :, None] + shifts[0], cols[None, None, :] + shifts[1]]
        pixels[:, rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1] = source
    return ndimage.gaussian_filter(
        pixels.astype(np.float32) / 255.0, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0
    )


def motion_blur(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    radius, sigma = [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)][severity - 1]
    blurred = motion_blur_images(x, radius, sigma, rng.uniform(-45, 45, size=len(x)))
    # ImageMagick wrote the result as an 8-bit PNG: rounded to the nearest level.
    return np.round(blurred * 255.0) / 255.0


def snow(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    loc, scale, zoom, threshold, radius, sigma, keep = [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
    ][severity - 1]
    n, height, width, _ = x.shape
    flakes = rng.normal(loc, scale, size=(n, height, width, 1)).astype(np.float32)
    flakes = clipped_zoom(flakes, zoom)
    flakes[flakes < threshold] = 0
    flakes = np.floor(np.clip(flakes, 0, 1) * 255.0) / 255.0  # the 8-bit layer handed to Wand
    flakes = (
        np.round(motion_blur_images(flakes, radius, sigma, rng.uniform(-135, -45, size=n)) * 255.0)
        / 255.0
    )
    x = keep * x + (1 - keep) * np.maximum(x, gray(x) * 1.5 + 0.5)
    return x + flakes + flakes[:, ::-1, ::-1]


def spatter(x: np.ndarray, severity: int, rng: Rng) -> np.ndarray:
    loc, scale, sigma, threshold, strength, mud = [
        (0.62, 0.1, 0.7, 0.7, 0.5, 0),
        (0.65, 0.1, 0.8, 0.7, 0.5, 0),
        (0.65, 0.3, 1, 0.69, 0.5, 0),
        (0.65, 0.1, 0.7, 0.69, 0.6, 1),
        (0.65, 0.1, 0.5, 0.68, 0.6, 1),
    ][severity - 1]
    n, height, width, channels = x.shape
    liquid = rng.normal(loc, scale, size=(n, height, width))
    liquid = ndimage.gaussian_filter(liquid, sigma=(0, sigma, sigma), mode="nearest", truncate=4.0)
    liquid[liquid < threshold] = 0
    if mud:
        m = ndimage.gaussian_filter(
            (liquid > threshold).astype(np.float32),
            sigma=(0, strength, strength),
            mode="nearest",
            truncate=4.0,
        )
        m[m < 0.8] = 0
        colour = np.array([63, 42, 20], np.float32) / 255.0
        m = m[..., None]
        return x * (1 - m) + m * in_channels(colour, channels)
    # Water: ripples from the distance to the puddles' edges, embossed and blurred.
    layer = (liquid * 255).astype(np.uint8)
    edges = canny(layer, 50, 150)
    dist = np.empty((n, height, width), np.float64)
    for i in range(n):
        # cv2.distanceTransform(DIST_L2, 5) approximates this exact Euclidean distance; no
        # edge at all means every distance exceeds the cut at 20.
        dist[i] = ndimage.distance_transform_edt(~edges[i]) if edges[i].any() else 20.0
    dist = box3(np.minimum(dist, 20.0))
    dist = equalize_hist(dist)
    emboss = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]], np.float64)
    dist = np.clip(
        ndimage.correlate(dist.astype(np.float64), emboss[None], mode="mirror"), 0, 255
    ).astype(np.uint8)
    m = liquid * box3(dist).astype(np.float64)
    peak = m.max(axis=(1, 2), keepdims=True)
    m = np.divide(m, peak, out=np.zeros_like(m), where=peak > 0) * strength
    colour = np.array([175, 238, 238], np.float32) / 255.0  # pale turquoise
    return x + m[..., None].astype(np.float32) * in_channels(colour, channels)
