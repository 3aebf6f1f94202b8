"""Feature-space hijacking (FSHA; Pasquini, Ateniese and Bernaschi, "Unleashing the Tiger", CCS 2021) as a red-team
server of a vanilla split, on the real engine.

Theory of operation. In a vanilla split the server receives the client's activations ``z = f(x)`` and answers with
their gradients. A malicious server need not send the gradients of the shared task: FSHA sends those of its own
objective. On public data of the same domain (here a held-apart part of the images) it trains a *pilot* encoder
``f~`` and its decoder ``f~⁻¹`` as an autoencoder, ``min ‖f~⁻¹(f~(x_pub)) − x_pub‖²``, and a discriminator ``D``
(Wasserstein critic with gradient penalty) that tells pilot features ``f~(x_pub)`` from the client's ``f(x)``. The
gradient it returns is that of ``−D(f(x))``: the client's Adam steps then move ``f`` until its features look like
the pilot's, and the decoder, trained for the pilot's feature space, inverts them: ``x ≈ f~⁻¹(f(x))``. The client
cannot see the difference in its loss, because it has none: in a vanilla split the loss lives at the server.

How it runs in the engine. The server of ``Topology.vanilla`` is the party with the labels and the ``top`` segment.
:meth:`FshaServer.top` is the module it runs as ``top`` (``segments={"top": attacker.top()}``): an honest-looking
linear classifier on ``z`` that also keeps the batch's ``z``. :meth:`FshaServer.hooks` gives the server's
:class:`~vsplit.protocol.training.hooks.GradientHook`: when the machine sends the gradient of ``z`` back, the hook
replaces it with the adversarial one and takes one training step of ``D``, ``f~`` and ``f~⁻¹``. Nothing else
changes: same messages, shapes and schedule, so a client sees a well-formed run. ``truth`` (the true images of the
aligned rows) is for *measuring* the attack only, never used by it: ``history`` records per step the quality of what
the server reconstructs from that step's batch (``server_sees``), ``snapshots`` the reconstructions at chosen steps.

Example:
    >>> import torch
    >>> attacker = FshaServer(public=torch.rand(32, 1, 8, 8), width=256, n_classes=10, seed=0)
    >>> top = attacker.top()
    >>> z = torch.rand(4, 256)
    >>> top(z).shape
    torch.Size([4, 10])
    >>> from vsplit.protocol.training.hooks import StepInfo
    >>> hook = attacker.hooks().gradient_hooks[0]
    >>> hook(torch.zeros(4, 256), StepInfo(party="client", epoch=0, step=0, rows=None)).shape
    torch.Size([4, 256])
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from vsplit.models.segments import ImageHead
from vsplit.privacy.images import quality
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks


class PilotEncoder(nn.Module):
    """The attacker's own encoder ``f~`` on images ``(n, 1, h, w)`` in [0, 1]: an :class:`ImageHead` (or any)."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        flat = images.reshape(images.shape[0], -1)
        return self.head(torch.zeros(len(flat), 0, dtype=torch.long), flat)


def _mlp(widths: Sequence[int], *, last: nn.Module | None = None) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.LeakyReLU(0.2)]
    layers.pop()
    if last is not None:
        layers.append(last)
    return nn.Sequential(*layers)


class _RecordingTop(nn.Module):
    """The ``top`` the malicious server runs: a linear classifier (so validation looks ordinary) that keeps ``z``."""

    def __init__(self, width: int, n_classes: int) -> None:
        super().__init__()
        self.classifier = nn.Linear(width, n_classes)
        self.last: torch.Tensor | None = None

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        self.last = z.detach()
        return self.classifier(z.detach())


class FshaServer:
    """The malicious server's state: public images, pilot encoder, decoder, critic and their optimizers.

    Args:
        public: the attacker's public images ``(n, 1, h, w)`` in [0, 1], same domain as the client's.
        width: width of the client's activations (what crosses the cut).
        n_classes: output width of the honest-looking classifier the server runs as ``top``.
        seed: seeds the attacker's networks and its sampling of public batches.
        pilot: the pilot encoder on images (default: an :class:`ImageHead` like the client's, flattened).
        lr: Adam learning rate of pilot and decoder (and of the critic unless ``critic_lr``).
        critic_lr: the critic's learning rate.
        critic_steps: critic updates per received batch (each on a fresh public batch).
        pilot_steps: train the pilot and decoder only for this many steps, then keep them (a fixed target).
        gradient_penalty: weight of the critic's gradient penalty (WGAN-GP).
        truth: the true images of the aligned rows ``(n_rows, h, w)`` in [0, 1], for measurement only.
        snapshot_steps: steps at which to keep the reconstructions of the batch (for pictures).
        measure_every: measure reconstruction quality every this many steps (with ``truth``).
    """

    def __init__(
        self,
        *,
        public: torch.Tensor,
        width: int,
        n_classes: int,
        seed: int,
        pilot: nn.Module | None = None,
        lr: float = 1e-3,
        critic_lr: float | None = None,
        critic_steps: int = 1,
        pilot_steps: int | None = None,
        gradient_penalty: float = 10.0,
        truth: np.ndarray | None = None,
        snapshot_steps: Sequence[int] = (),
        measure_every: int = 1,
    ) -> None:
        self.public = public.float()
        self.shape = tuple(public.shape[1:])
        pixels = int(np.prod(self.shape))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.pilot = PilotEncoder(pilot if pilot is not None else ImageHead(shape=self.shape))
            self.decoder = _mlp([width, 256, 256, pixels], last=nn.Sigmoid())
            self.critic = _mlp([width, 256, 256, 1])
            self._top = _RecordingTop(width, n_classes)
        self.gradient_penalty = gradient_penalty
        self.autoencoder_opt = torch.optim.Adam([*self.pilot.parameters(), *self.decoder.parameters()], lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=critic_lr or lr, betas=(0.5, 0.9))
        self.critic_steps, self.pilot_steps = critic_steps, pilot_steps
        self.generator = torch.Generator().manual_seed(seed)
        self.truth = truth
        self.snapshot_steps = set(snapshot_steps)
        self.measure_every = measure_every
        self.steps = 0
        self.history: list[dict[str, float]] = []
        self.snapshots: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def top(self) -> nn.Module:
        """The module the server runs as its ``top`` segment."""
        return self._top

    def hooks(self) -> TrainingHooks:
        """The server's gradient hook (pass as the estimator's ``hooks``, merged with any other)."""
        return TrainingHooks(gradient_hooks=[self._hook])

    def reconstruct(self, z: torch.Tensor) -> np.ndarray:
        """What the server reconstructs from activations ``z``: images ``(n, h, w)`` in [0, 1]."""
        with torch.no_grad():
            return self.decoder(z.float()).reshape(len(z), *self.shape[-2:]).numpy().astype(np.float64)

    def _hook(self, values: torch.Tensor, info: StepInfo) -> torch.Tensor:
        z = self._top.last
        if z is None or z.shape != values.shape:
            return values
        z = z.float()
        adversarial = self._client_gradient(z)
        for _ in range(self.critic_steps):
            batch = self._public_batch(len(z))
            self._train_critic(z, batch)
        if self.pilot_steps is None or self.steps < self.pilot_steps:
            self._train_autoencoder(batch)
        self._measure(z, info)
        self.steps += 1
        return adversarial.to(values.dtype)

    def _public_batch(self, n: int) -> torch.Tensor:
        return self.public[torch.randint(len(self.public), (n,), generator=self.generator)]

    def _client_gradient(self, z: torch.Tensor) -> torch.Tensor:
        leaf = z.clone().requires_grad_(True)
        loss = -self.critic(leaf).mean()  # the client's features should look like the pilot's to the critic
        (grad,) = torch.autograd.grad(loss, leaf)
        return grad

    def _train_critic(self, z: torch.Tensor, public: torch.Tensor) -> None:
        with torch.no_grad():
            pilot = self.pilot(public)
        alpha = torch.rand(len(z), 1, generator=self.generator)
        mixed = (alpha * z + (1 - alpha) * pilot).requires_grad_(True)
        (slope,) = torch.autograd.grad(self.critic(mixed).sum(), mixed, create_graph=True)
        penalty = ((slope.norm(dim=1) - 1) ** 2).mean()
        loss = self.critic(z).mean() - self.critic(pilot).mean() + self.gradient_penalty * penalty
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()

    def _train_autoencoder(self, public: torch.Tensor) -> None:
        out = self.decoder(self.pilot(public)).reshape(public.shape)
        loss = ((out - public) ** 2).mean()
        self.autoencoder_opt.zero_grad()
        loss.backward()
        self.autoencoder_opt.step()

    def _measure(self, z: torch.Tensor, info: StepInfo) -> None:
        step = self.steps
        wanted = step in self.snapshot_steps
        if self.truth is None or info.rows is None or not (wanted or step % self.measure_every == 0):
            return
        seen = self.reconstruct(z)
        truth = self.truth[np.asarray(info.rows)]
        if step % self.measure_every == 0:
            self.history.append({"step": step, "epoch": info.epoch, **quality(truth, seen)})
        if wanted:
            self.snapshots[step] = (truth, seen)

    def first_step_reaching(self, ssim: float) -> int | None:
        """The first measured step whose reconstructions reach mean SSIM ``ssim`` (None if none did)."""
        return next((int(h["step"]) for h in self.history if h["ssim"] >= ssim), None)


__all__ = ["FshaServer", "PilotEncoder"]
