"""Image quality metrics: known answers for SSIM (Wang et al.'s formula), PSNR and MSE."""

from __future__ import annotations

import numpy as np
import pytest

from vsplit.privacy.images import K1, gaussian_window, pixel_mse, psnr, quality, ssim


def test_ssim_of_constant_images_is_the_luminance_term():
    # with no variance anywhere, SSIM reduces to (2 μa μb + C1) / (μa² + μb² + C1)
    a, b = np.full((1, 8, 8), 0.2), np.full((1, 8, 8), 0.6)
    c1 = K1**2
    assert ssim(a, b)[0] == pytest.approx((2 * 0.2 * 0.6 + c1) / (0.2**2 + 0.6**2 + c1))


def test_ssim_is_one_for_a_copy_symmetric_and_falls_with_noise():
    rng = np.random.default_rng(0)
    x = rng.random((4, 8, 8))
    assert np.allclose(ssim(x, x), 1.0)
    y = np.clip(x + 0.2 * rng.normal(size=x.shape), 0, 1)
    assert np.allclose(ssim(x, y), ssim(y, x))
    values = [ssim(x, np.clip(x + s * rng.normal(size=x.shape), 0, 1)).mean() for s in (0.05, 0.2, 0.5)]
    assert values[0] > values[1] > values[2]
    assert ssim(x, 1 - x).mean() < 0  # an inverted image is anti-correlated


def test_ssim_window_is_wang_et_al_where_the_image_is_large_enough():
    assert len(gaussian_window(11)) == 11
    big = np.random.default_rng(1).random((1, 16, 16))
    assert ssim(big, big)[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        ssim(big, big[:, :8, :8])


def test_psnr_and_mse_known_answers():
    x = np.zeros((2, 8, 8))
    assert pixel_mse(x, x + 0.1) == pytest.approx([0.01, 0.01])
    assert psnr(x, x + 0.1) == pytest.approx([20.0, 20.0])
    assert psnr(x, x)[0] == 100.0
    q = quality(x + 0.5, x + 0.5)
    assert q["ssim"] == 1.0 and q["recognisable"] == 1.0
