"""A partner process whose bottom model's activations are replaced by 3e38 (finite, but far out of range): issue 29's
tampered-tensor attack. Run as ``python tests/_hostile_partner.py <vsplit arguments>``; it is the ``vsplit`` command
with the partner's defense hooks swapped for the attack."""

from __future__ import annotations

import sys

import torch

from vsplit.cli.main import main
from vsplit.node.aligned import AlignedNode
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks

HUGE = 3e38


def huge(values: torch.Tensor, info: StepInfo) -> torch.Tensor:
    """Every training activation this partner sends becomes 3e38 (the graph kept, so its gradient is zero)."""
    return values * 0 + HUGE if info.training else values


def hostile_hooks(self: AlignedNode, *, network: int = 0) -> TrainingHooks:
    return TrainingHooks(embedding_hooks={self.name: [huge]})


if __name__ == "__main__":
    AlignedNode.defense_hooks = hostile_hooks  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
