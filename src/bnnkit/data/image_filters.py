"""The image operations the corruptions are made of, written in NumPy and SciPy.

CIFAR-10-C's ``make_cifar_c.py`` calls OpenCV (Canny edges, histogram equalisation, box blur),
ImageMagick through Wand (motion blur), skimage and Pillow. None of the first three is a
dependency of bnnkit, so each step is written here as an equivalent on (N, H, W[, C]) batches,
saying in its docstring what it reproduces and where it differs; the corruptions of
:mod:`bnnkit.data.corruption_recipes` are built from them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import ndimage

Rng = np.random.Generator


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The anti-aliased disk of ``make_cifar_c.py``: a normalised disk, Gaussian-blurred.

    The disk ``X^2 + Y^2 <= radius^2`` on a 17 x 17 grid (larger radii: (2r + 1)^2) sums to 1 and
    is smoothed with a 3 x 3 (larger radii: 5 x 5) Gaussian of sigma ``alias_blur``; all-zero
    border rows and columns are trimmed symmetrically.

    Example:
        >>> disk_kernel(0.3, 0.4).shape
        (3, 3)
    """
    if radius <= 8:
        grid, ksize = np.arange(-8, 8 + 1), 3
    else:
        grid, ksize = np.arange(-radius, radius + 1), 5
    xx, yy = np.meshgrid(grid, grid)
    disk = np.asarray(xx**2 + yy**2 <= radius**2, dtype=np.float64)
    disk /= disk.sum()
    offsets = np.arange(ksize) - (ksize - 1) / 2
    weights = np.exp(-(offsets**2) / (2 * alias_blur**2))
    weights /= weights.sum()
    for axis in (0, 1):
        disk = ndimage.correlate1d(disk, weights, axis=axis, mode="mirror")
    nonzero = np.nonzero(disk > 1e-12)
    centre = disk.shape[0] // 2
    reach = int(max(np.abs(nonzero[0] - centre).max(), np.abs(nonzero[1] - centre).max()))
    return disk[centre - reach : centre + reach + 1, centre - reach : centre + reach + 1]


def _zoom_axis(x: np.ndarray, factor: float, axis: int) -> np.ndarray:
    # Linear interpolation along one axis with scipy.ndimage.zoom(order=1)'s grid: output length
    # round(n * factor), output sample j at input coordinate j (n - 1) / (m - 1).
    n = x.shape[axis]
    m = round(n * factor)
    coords = np.arange(m) * ((n - 1) / (m - 1)) if m > 1 else np.zeros(1)
    lower = np.minimum(np.floor(coords).astype(np.int64), n - 1)
    upper = np.minimum(lower + 1, n - 1)
    shape = [1] * x.ndim
    shape[axis] = m
    weight = (coords - lower).astype(x.dtype).reshape(shape)
    return np.take(x, lower, axis=axis) * (1 - weight) + np.take(x, upper, axis=axis) * weight


def clipped_zoom(x: np.ndarray, factor: float) -> np.ndarray:
    # Zoom the centre crop of size ceil(size / factor) back to (at least) the full size
    # (bilinear, i.e. scipy.ndimage.zoom(order=1) applied to each image).
    height, width = x.shape[1], x.shape[2]
    ch, cw = int(np.ceil(height / factor)), int(np.ceil(width / factor))
    top, left = (height - ch) // 2, (width - cw) // 2
    zoomed = _zoom_axis(_zoom_axis(x[:, top : top + ch, left : left + cw], factor, 1), factor, 2)
    trim_top, trim_left = (zoomed.shape[1] - height) // 2, (zoomed.shape[2] - width) // 2
    return zoomed[:, trim_top : trim_top + height, trim_left : trim_left + width]


def in_hsv(x: np.ndarray, change: Callable[[np.ndarray], None]) -> np.ndarray:
    from matplotlib.colors import hsv_to_rgb, rgb_to_hsv

    gray = x.shape[-1] == 1
    rgb = np.repeat(x, 3, axis=-1) if gray else x
    hsv = rgb_to_hsv(np.clip(rgb, 0, 1))
    change(hsv)
    out = hsv_to_rgb(hsv).astype(np.float32)
    return out[..., :1] if gray else out


def plasma_fractal(rng: Rng, mapsize: int = 32, wibbledecay: float = 3.0) -> np.ndarray:
    """A diamond-square height map in [0, 1] of shape (mapsize, mapsize) (power of two).

    Example:
        >>> plasma_fractal(np.random.default_rng(0), 8).shape
        (8, 8)
    """
    maparray = np.zeros((mapsize, mapsize), dtype=np.float64)
    stepsize, wibble = mapsize, 100.0

    def wibbledmean(array: np.ndarray) -> np.ndarray:
        return array / 4 + wibble * rng.uniform(-wibble, wibble, array.shape)

    while stepsize >= 2:
        half = stepsize // 2
        corners = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        squares = corners + np.roll(corners, shift=-1, axis=0)
        squares += np.roll(squares, shift=-1, axis=1)
        maparray[half:mapsize:stepsize, half:mapsize:stepsize] = wibbledmean(squares)
        dr = maparray[half:mapsize:stepsize, half:mapsize:stepsize]
        ul = maparray[0:mapsize:stepsize, 0:mapsize:stepsize]
        left = dr + np.roll(dr, 1, axis=0) + ul + np.roll(ul, -1, axis=1)
        maparray[0:mapsize:stepsize, half:mapsize:stepsize] = wibbledmean(left)
        top = dr + np.roll(dr, 1, axis=1) + ul + np.roll(ul, -1, axis=0)
        maparray[half:mapsize:stepsize, 0:mapsize:stepsize] = wibbledmean(top)
        stepsize //= 2
        wibble /= wibbledecay
    maparray -= maparray.min()
    return maparray / maparray.max()


def pil_each(images: np.ndarray, transform: Callable) -> np.ndarray:
    from PIL import Image

    gray = images.shape[-1] == 1
    out = np.empty_like(images)
    for i, image in enumerate(images):
        pil = Image.fromarray(image[..., 0] if gray else image, mode="L" if gray else "RGB")
        result = np.asarray(transform(pil))
        out[i] = result[..., None] if gray else result
    return out


def motion_kernel(radius: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """ImageMagick's ``-motion-blur radius x sigma`` kernel: one-sided Gaussian weights.

    ``2 ceil(radius) + 1`` taps at distances ``i = 0, 1, ...`` behind the pixel, weights
    ``exp(-i^2 / (2 sigma^2))`` normalised to sum 1 (ImageMagick's ``MotionBlurImage``, which
    CIFAR-10-C called through Wand).

    Returns:
        ``(distances, weights)``.

    Example:
        >>> distances, weights = motion_kernel(6, 1)
        >>> len(distances), round(float(weights.sum()), 6), bool(weights[0] > weights[1])
        (13, 1.0, True)
    """
    distances = np.arange(int(2 * np.ceil(radius) + 1))
    weights = np.exp(-(distances.astype(np.float64) ** 2) / (2 * sigma**2))
    return distances, weights / weights.sum()


def motion_blur_images(
    x: np.ndarray, radius: float, sigma: float, angles: np.ndarray
) -> np.ndarray:
    """Motion-blur each image of (N, H, W, C) floats along its own angle (degrees).

    ImageMagick (which CIFAR-10-C used through Wand) is not a dependency; this is a numpy
    equivalent of ImageMagick's ``MotionBlurImage``: output pixel (row y, column x) is
    ``sum_i w_i image[y + oy_i, x + ox_i]`` with tap offsets
    ``(ox_i, oy_i) = (ceil(i cos a - 1/2), ceil(i sin a - 1/2))`` and out-of-image taps
    reading the nearest edge pixel (ImageMagick's default virtual pixels).

    Example:
        >>> image = np.zeros((1, 5, 5, 1))
        >>> image[0, 2, 4] = 1.0  # a bright pixel on the right edge, streaked leftwards
        >>> out = motion_blur_images(image, 1, 1.0, np.array([0.0]))
        >>> np.round(out[0, 2, 2:, 0], 3).tolist()
        [0.078, 0.426, 1.0]
    """
    n, height, width, _ = x.shape
    distances, weights = motion_kernel(radius, sigma)
    radians = np.deg2rad(np.asarray(angles, np.float64))[:, None]
    off_x = np.ceil(distances * np.cos(radians) - 0.5).astype(np.int64)  # (N, taps)
    off_y = np.ceil(distances * np.sin(radians) - 0.5).astype(np.int64)
    index = np.arange(n)[:, None, None]
    out = np.zeros_like(x)
    for tap, weight in enumerate(weights.astype(x.dtype)):
        rows = np.clip(np.arange(height)[None] + off_y[:, tap : tap + 1], 0, height - 1)
        cols = np.clip(np.arange(width)[None] + off_x[:, tap : tap + 1], 0, width - 1)
        out += weight * x[index, rows[:, :, None], cols[:, None, :]]
    return out


def gray(x: np.ndarray) -> np.ndarray:
    # OpenCV's RGB2GRAY weights; a grayscale image is its own gray.
    if x.shape[-1] == 1:
        return x
    return (x @ np.array([0.299, 0.587, 0.114], np.float32))[..., None]


def canny(images: np.ndarray, low: float, high: float) -> np.ndarray:
    """OpenCV's ``Canny(image, low, high)`` (3 x 3 Sobel, L1 gradient) on (N, H, W) uint8.

    Gradient magnitude ``|dx| + |dy|`` (edges replicated); a pixel is kept when it exceeds
    ``low`` and is a maximum along its gradient direction (quantised to 0, 45, 90, 135 degrees,
    ties kept on the right/lower side as OpenCV does); kept pixels above ``high``, and kept
    pixels 8-connected to them, are edges.

    Returns:
        bool (N, H, W) edge map.

    Example:
        >>> step = np.zeros((1, 6, 6), np.uint8)
        >>> step[:, :, 3:] = 200
        >>> canny(step, 50, 150)[0].astype(int).sum(axis=0).tolist()
        [0, 0, 6, 0, 0, 0]
    """
    img = images.astype(np.int64)
    # 3 x 3 Sobel within each image (ndimage.sobel would also smooth across the batch axis)
    derivative, smoothing = np.array([-1, 0, 1]), np.array([1, 2, 1])
    dx = ndimage.correlate1d(
        ndimage.correlate1d(img, derivative, axis=2, mode="nearest"),
        smoothing,
        axis=1,
        mode="nearest",
    )
    dy = ndimage.correlate1d(
        ndimage.correlate1d(img, derivative, axis=1, mode="nearest"),
        smoothing,
        axis=2,
        mode="nearest",
    )
    mag = np.abs(dx) + np.abs(dy)
    padded = np.pad(mag, ((0, 0), (1, 1), (1, 1)))  # outside the image: magnitude 0

    def at(dr: int, dc: int) -> np.ndarray:
        height, width = mag.shape[1:]
        return padded[:, 1 + dr : 1 + dr + height, 1 + dc : 1 + dc + width]

    ax, ay = np.abs(dx).astype(np.float64), np.abs(dy).astype(np.float64)
    tan22 = 0.4142135623730950
    horizontal = ay < ax * tan22
    vertical = ~horizontal & (ay > ax * (tan22 + 2))  # tan 67.5 = tan 22.5 + 2
    same_sign = (dx ^ dy) >= 0
    diagonal = np.where(
        same_sign, (mag > at(-1, -1)) & (mag > at(1, 1)), (mag > at(-1, 1)) & (mag > at(1, -1))
    )
    maximum = np.where(
        horizontal,
        (mag > at(0, -1)) & (mag >= at(0, 1)),
        np.where(vertical, (mag > at(-1, 0)) & (mag >= at(1, 0)), diagonal),
    )
    candidate = maximum & (mag > low)
    within_image = np.zeros((3, 3, 3), bool)
    within_image[1] = True  # 8-connected inside an image, never across the batch
    labels, count = ndimage.label(candidate, structure=within_image)
    strong = np.zeros(count + 1, bool)
    strong[np.unique(labels[candidate & (mag > high)])] = True
    strong[0] = False
    return strong[labels]


def equalize_hist(images: np.ndarray) -> np.ndarray:
    """OpenCV's ``equalizeHist`` on each (H, W) uint8 image of an (N, H, W) batch.

    Example:
        >>> equalize_hist(np.array([[[10, 10], [20, 30]]], np.uint8)).tolist()
        [[[0, 0], [128, 255]]]
    """
    out = np.empty_like(images)
    for i, image in enumerate(images):
        hist = np.bincount(image.ravel(), minlength=256)
        first = int(np.argmax(hist > 0))
        total = image.size
        if hist[first] == total:
            out[i] = first
            continue
        lut = np.clip(
            np.rint((np.cumsum(hist) - hist[first]) * (255.0 / (total - hist[first]))), 0, 255
        ).astype(np.uint8)
        out[i] = lut[image]
    return out


def box3(images: np.ndarray) -> np.ndarray:
    # cv2.blur(img, (3, 3)) on uint8: the 3 x 3 mean, rounded, edges mirrored (REFLECT_101).
    return np.rint(
        ndimage.uniform_filter(images.astype(np.float64), size=(1, 3, 3), mode="mirror")
    ).astype(np.uint8)


def in_channels(colour: np.ndarray, channels: int) -> np.ndarray:
    # An RGB colour for an image with `channels` channels (grayscale: its OpenCV gray).
    return colour if channels == 3 else np.array([colour @ [0.299, 0.587, 0.114]], np.float32)
