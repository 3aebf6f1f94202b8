"""Model inversion by the party that receives activations: recover the inputs from what crosses the cut (He, Zhang
and Lee, "Model Inversion Attacks against Collaborative Inference", ACSAC 2019).

Theory of operation. *White-box* (the attacker knows the client's layers and weights, He et al.'s regularised
maximum likelihood): find the image ``x`` whose activations match the observed ones, ``min_x ‖f(x) − z‖² / ‖z‖² +
λ·TV(x)``, where the total variation ``TV`` (mean absolute difference of neighbouring pixels) prefers natural images
and the distance is relative so one ``λ`` serves every cut. ``x = sigmoid(u)`` keeps pixels in [0, 1]; Adam on
``u`` from a grey image. *Black-box* (the attacker cannot see the weights but has images of the same domain and
their activations, e.g. by querying the client's layers: He et al.'s inverse network): train a network ``g`` from
activations to images on those pairs, ``min ‖g(f(x_aux)) − x_aux‖²``, and apply it to the observed activations.
Both return images in [0, 1] to score with :mod:`vsplit.privacy.images`.

Example:
    >>> import torch
    >>> f = torch.nn.Conv2d(1, 4, 3, padding=1)
    >>> def forward(images):
    ...     return f(images.reshape(-1, 1, 8, 8)).flatten(1)
    >>> x = torch.rand(3, 8, 8)
    >>> with torch.no_grad():
    ...     z = forward(x)
    >>> guess = white_box_inversion(forward, z, shape=(8, 8), steps=300, tv_weight=0.0)
    >>> from vsplit.privacy.images import ssim
    >>> bool(ssim(x.numpy(), guess).mean() > 0.9)
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

Forward = Callable[[torch.Tensor], torch.Tensor]


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of horizontally and vertically neighbouring pixels, per image ``(n, h, w)``."""
    dh = (x[:, 1:, :] - x[:, :-1, :]).abs().mean(dim=(1, 2))
    dw = (x[:, :, 1:] - x[:, :, :-1]).abs().mean(dim=(1, 2))
    return dh + dw


def white_box_inversion(
    forward: Forward,
    observed: torch.Tensor,
    *,
    shape: Sequence[int],
    steps: int = 1500,
    lr: float = 0.5,
    tv_weight: float = 0.01,
) -> np.ndarray:
    """Images ``(n, *shape)`` in [0, 1] whose activations under ``forward`` best match ``observed`` (n, ...).

    Args:
        forward: the client's layers, from images ``(n, *shape)`` in [0, 1] to activations shaped as ``observed``.
        observed: the activations the attacker received.
        steps, lr: Adam iterations and learning rate on the images' logits.
        tv_weight: weight of the total-variation prior.
    """
    target = observed.detach().float()
    scale = target.flatten(1).pow(2).sum(1).clamp_min(1e-12)
    logits = torch.zeros(len(target), *shape, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    for _ in range(steps):
        x = torch.sigmoid(logits)
        distance = (forward(x) - target).flatten(1).pow(2).sum(1) / scale
        loss = (distance + tv_weight * total_variation(x.reshape(len(x), *shape[-2:]))).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return torch.sigmoid(logits).reshape(len(target), *shape[-2:]).numpy().astype(np.float64)


class InverseNetwork(nn.Module):
    """He et al.'s inverse network: an MLP from flattened activations to the pixels (sigmoid), then reshaped."""

    def __init__(self, width: int, shape: Sequence[int], hidden: Sequence[int] = (512, 256)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        last = width
        for size in hidden:
            layers += [nn.Linear(last, size), nn.ReLU()]
            last = size
        layers += [nn.Linear(last, int(np.prod(shape))), nn.Sigmoid()]
        self.layers = nn.Sequential(*layers)
        self.shape = tuple(shape)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.layers(z.flatten(1)).reshape(len(z), *self.shape)


def black_box_inversion(
    aux_activations: torch.Tensor,
    aux_images: torch.Tensor,
    observed: torch.Tensor,
    *,
    epochs: int = 150,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
) -> np.ndarray:
    """Train an :class:`InverseNetwork` on ``(aux_activations, aux_images)`` pairs and invert ``observed``.

    ``aux_images`` ``(n, h, w)`` in [0, 1]; the activations of any shape (flattened). Returns ``(m, h, w)`` images.
    """
    x, y = aux_activations.detach().float().flatten(1), aux_images.detach().float()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = InverseNetwork(x.shape[1], tuple(y.shape[1:]))
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        for _ in range(epochs):
            order = torch.randperm(len(x))
            for start in range(0, len(x), batch_size):
                idx = order[start : start + batch_size]
                loss = (net(x[idx]) - y[idx]).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    with torch.no_grad():
        return net(observed.detach().float().flatten(1)).numpy().astype(np.float64)


__all__ = ["InverseNetwork", "black_box_inversion", "total_variation", "white_box_inversion"]
