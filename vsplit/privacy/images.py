"""How close a reconstructed image is to the original: pixel MSE, PSNR and SSIM (Wang et al., 2004).

Theory of operation. Images are float arrays in ``[0, 1]`` of shape ``(n, height, width)`` (or ``(n, 1, h, w)``).
``pixel_mse`` is the mean squared pixel error per image; ``psnr`` is ``10 log10(1 / mse)`` (data range 1, capped at
100 dB for an exact copy). :func:`ssim` follows Wang, Bovik, Sheikh and Simoncelli, "Image quality assessment: from
error visibility to structural similarity" (IEEE TIP 2004): local means, variances and covariance under a Gaussian
window of standard deviation 1.5, ``K1 = 0.01``, ``K2 = 0.03``, and the mean of the SSIM map. Their window is 11x11;
an 8x8 digit is smaller than that, so the window is truncated to the largest odd size that fits (7x7 for 8x8) and
normalised, and the borders are reflected so every pixel has a value in the map (for images of 11 pixels or more
this is Wang et al.'s window). He, Zhang and Lee (ACSAC 2019) call a reconstruction unrecognisable below SSIM 0.3.

Example:
    >>> import numpy as np
    >>> x = np.random.default_rng(0).random((2, 8, 8))
    >>> float(ssim(x, x).mean()), float(psnr(x, x).mean())
    (1.0, 100.0)
    >>> bool(ssim(x, np.clip(x + 0.3 * np.random.default_rng(1).normal(size=x.shape), 0, 1)).mean() < 0.8)
    True
"""

from __future__ import annotations

import numpy as np

#: Wang et al.'s constants and window (data range 1).
K1, K2, SIGMA, WINDOW = 0.01, 0.03, 1.5, 11
#: He et al.'s threshold: below this SSIM a reconstruction is unrecognisable.
UNRECOGNISABLE = 0.3


def _as_images(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 4 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3:
        raise ValueError(f"images must be (n, h, w) or (n, 1, h, w), got shape {x.shape}")
    return x


def gaussian_window(size: int, sigma: float = SIGMA) -> np.ndarray:
    """A normalised 1-D Gaussian window of odd ``size``.

    Example:
        >>> w = gaussian_window(7)
        >>> round(float(w.sum()), 6), int(w.argmax())
        (1.0, 3)
    """
    radius = size // 2
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    w = np.exp(-(t**2) / (2 * sigma**2))
    return w / w.sum()


def _filter(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Separable filtering of each image of ``x`` (n, h, w) by ``w``, borders reflected, same size out."""
    r = len(w) // 2
    padded = np.pad(x, ((0, 0), (r, r), (r, r)), mode="reflect" if min(x.shape[1:]) > r else "edge")
    h, v = x.shape[1], x.shape[2]
    rows = sum(w[k] * padded[:, k : k + h, :] for k in range(len(w)))
    return sum(w[k] * rows[:, :, k : k + v] for k in range(len(w)))


def ssim(a: np.ndarray, b: np.ndarray, *, data_range: float = 1.0) -> np.ndarray:
    """Mean structural similarity of each pair of images (one value per image, in [-1, 1])."""
    a, b = _as_images(a), _as_images(b)
    if a.shape != b.shape:
        raise ValueError(f"image shapes differ: {a.shape} and {b.shape}")
    size = min(WINDOW, *a.shape[1:])
    size -= 1 - size % 2  # odd
    w = gaussian_window(size)
    c1, c2 = (K1 * data_range) ** 2, (K2 * data_range) ** 2
    mu_a, mu_b = _filter(a, w), _filter(b, w)
    var_a = _filter(a * a, w) - mu_a**2
    var_b = _filter(b * b, w) - mu_b**2
    cov = _filter(a * b, w) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    return (num / den).mean(axis=(1, 2))


def pixel_mse(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean squared pixel error of each pair of images."""
    a, b = _as_images(a), _as_images(b)
    return ((a - b) ** 2).mean(axis=(1, 2))


def psnr(a: np.ndarray, b: np.ndarray, *, data_range: float = 1.0, cap: float = 100.0) -> np.ndarray:
    """Peak signal-to-noise ratio in dB of each pair of images (``cap`` for an exact copy)."""
    mse = pixel_mse(a, b)
    with np.errstate(divide="ignore"):
        out = 10 * np.log10(data_range**2 / mse)
    return np.minimum(out, cap)


def quality(original: np.ndarray, reconstructed: np.ndarray) -> dict[str, float]:
    """Means over the images: ``mse``, ``psnr``, ``ssim``, and ``recognisable``, the share with SSIM >= 0.3.

    Example:
        >>> x = np.zeros((3, 8, 8))
        >>> quality(x, x)["ssim"], quality(x, x + 0.1)["mse"]
        (1.0, 0.01)
    """
    s = ssim(original, reconstructed)
    return {
        "mse": float(np.round(pixel_mse(original, reconstructed).mean(), 12)),
        "psnr": float(psnr(original, reconstructed).mean()),
        "ssim": float(np.round(s.mean(), 12)),
        "recognisable": float((s >= UNRECOGNISABLE).mean()),
    }


__all__ = ["UNRECOGNISABLE", "gaussian_window", "pixel_mse", "psnr", "quality", "ssim"]
