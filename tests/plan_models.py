"""Hand-built models for the planner's tests (no torchvision): skips, long skips, routing by index, tabular.

Each model is small enough to plan in well under a second; the comments give the shapes the tests count by hand.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F

from vsplit.models.tabular import TabularMLP


class Block(nn.Module):
    """A ResNet basic block with an in-place skip (``out += identity``) and a shared activation module."""

    def __init__(self, c_in: int, c_out: int, act: nn.Module, *, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.act = act
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False) if stride != 1 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.act(self.bn1(self.conv1(x)))))
        out += x if self.downsample is None else self.downsample(x)
        return self.act(out)


class BlockNet(nn.Module):
    """Input 3x8x8 -> stem 4x8x8 -> block1 4x8x8 -> block2 8x4x4 -> pool 8 -> fc 3. One ReLU object everywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.act = nn.ReLU()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block1 = Block(4, 4, self.act)
        self.block2 = Block(4, 8, self.act, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block2(self.block1(self.act(self.stem(x))))
        return self.fc(self.pool(x).view(x.size(0), -1))  # a size read before the cut, used after it


def _conv_relu(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    """Input 3x8x8; encoder 4x8x8, 8x4x4, bottleneck 8x2x2; decoder concatenates the encoder maps (long skips)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1, self.enc2, self.mid = _conv_relu(3, 4), _conv_relu(4, 8), _conv_relu(8, 8)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.dec2, self.dec1 = _conv_relu(16, 4), _conv_relu(8, 4)
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up(d2), e1], 1))
        return self.head(d1)


class Conv(nn.Conv2d):
    """Ultralytics-style conv: convolution then SiLU, one module with no children."""

    def __init__(self, c_in: int, c_out: int, k: int = 1, s: int = 1) -> None:
        super().__init__(c_in, c_out, k, s, padding=k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(super().forward(x))


class C2f(nn.Module):
    """Split in two with ``chunk``, run one conv on the second half, concatenate all three (as Ultralytics' C2f)."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.c = c_out // 2
        self.cv1 = Conv(c_in, 2 * self.c)
        self.m = nn.ModuleList([Conv(self.c, self.c, 3)])
        self.cv2 = Conv(3 * self.c, c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class Concat(nn.Module):
    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(xs, 1)


class Detect(nn.Module):
    """Three 1x1 heads; assigns its ``anchors`` buffer during forward (export leaves fake tensors there)."""

    def __init__(self, channels: tuple[int, ...], n_out: int = 3) -> None:
        super().__init__()
        self.cv = nn.ModuleList(nn.Conv2d(c, n_out, 1) for c in channels)
        self.register_buffer("anchors", torch.zeros(84))

    def forward(self, xs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        outs = [conv(x) for conv, x in zip(self.cv, xs, strict=True)]
        self.anchors = torch.cat([torch.arange(o.shape[2] * o.shape[3], dtype=torch.float32) for o in outs])
        return tuple(outs)


#: (from, module) per layer, Ultralytics-style; "from" -1 is the previous layer. Input 3x16x16.
def _layers() -> list[tuple[int | list[int], nn.Module]]:
    return [
        (-1, Conv(3, 4, 3, 2)),          # 0: 4x8x8
        (-1, C2f(4, 4)),                 # 1: 4x8x8   (read by the neck)
        (-1, Conv(4, 8, 3, 2)),          # 2: 8x4x4
        (-1, C2f(8, 8)),                 # 3: 8x4x4   (read by the neck)
        (-1, Conv(8, 8, 3, 2)),          # 4: 8x2x2
        (-1, C2f(8, 8)),                 # 5: 8x2x2   end of the backbone (read by the head)
        (-1, nn.Upsample(scale_factor=2.0)),  # 6: 8x4x4
        ([-1, 3], Concat()),             # 7: 16x4x4
        (-1, C2f(16, 8)),                # 8: 8x4x4   (read by the head)
        (-1, nn.Upsample(scale_factor=2.0)),  # 9: 8x8x8
        ([-1, 1], Concat()),             # 10: 12x8x8
        (-1, C2f(12, 4)),                # 11: 4x8x8
        ([11, 8, 5], Detect((4, 8, 8))),  # 12: 3x8x8, 3x4x4, 3x2x2
    ]


class Detector(nn.Module):
    """Backbone, neck and head in one ``nn.ModuleList`` routed by index, as Ultralytics' ``DetectionModel``."""

    def __init__(self) -> None:
        super().__init__()
        layers = _layers()
        self.model = nn.ModuleList(m for _, m in layers)
        for i, (f, m) in enumerate(layers):
            m.f, m.i = f, i
        self.save = sorted({j for f, _ in layers for j in ([f] if isinstance(f, int) else f) if j != -1})

    def forward(self, x: torch.Tensor, *args: object) -> tuple[torch.Tensor, ...]:
        y: list[torch.Tensor | None] = []
        for m in self.model:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in self.save else None)
        return x


class Gate(nn.Module):
    """A data-dependent branch (``if h.mean() > 0``) and a dict output; ``data_dependent=False`` tests a flag."""

    def __init__(self, *, data_dependent: bool = True, bias: float = 1.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.pos, self.neg = nn.Linear(6, 6), nn.Linear(6, 5)
        self.out_pos, self.out_neg = nn.Linear(6, 2), nn.Linear(5, 2)
        self.data_dependent = data_dependent
        with torch.no_grad():
            self.fc1.bias.fill_(bias)
            self.fc1.weight.mul_(0.01)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.fc1(x)
        positive = bool(h.mean() > 0) if self.data_dependent else True
        if positive:
            h = self.pos(h)
            return {"logits": self.out_pos(h), "hidden": h}
        h = self.neg(h)
        return {"logits": self.out_neg(h), "hidden": h}


class Tied(nn.Module):
    """An autoencoder whose decoder reuses the encoder's weight (a parameter shared across the cut after enc)."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(6, 3)
        self.act = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.act(self.enc(x)), self.enc.weight.t())


def tabular() -> TabularMLP:
    """The project's bottom model: embeddings of widths 3 and 4, two numeric columns, hidden 8, embedding 4."""
    return TabularMLP(cardinalities=[3, 5], n_numeric=2, hidden=(8,), out_dim=4)


def tabular_inputs(batch: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3, (batch, 2), generator=g), torch.randn(batch, 2, generator=g)


def image(batch: int, size: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def gate_inputs() -> torch.Tensor:
    return torch.randn(4, 4, generator=torch.Generator().manual_seed(0))


#: The test models by name: a factory and its example inputs (a batch of 4 or 8, so the privacy proxy runs).
CASES = {
    "blocknet": (BlockNet, lambda: (image(4, 8),)),
    "unet": (UNet, lambda: (image(4, 8),)),
    "detector": (Detector, lambda: (image(4, 16),)),
    "tabular": (tabular, tabular_inputs),
    "gate": (Gate, lambda: (gate_inputs(),)),
}


@functools.cache
def planned(name: str, method: str = "auto") -> tuple[nn.Module, tuple, object]:
    """(model in eval mode, its inputs, its plan), made once per test session: planning is the slow part."""
    from vsplit.plan import plan_cuts

    make, inputs = CASES[name]
    torch.manual_seed(0)
    model, x = make().eval(), inputs()
    return model, x, plan_cuts(model, x, method=method)
