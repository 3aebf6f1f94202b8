"""The adaptive attack's premise (benchmarks/privacy_adaptive.py): orthogonal noise leaves the projection of the
gradients onto the partner's own activations exactly clean, which the partner can compute; centred noise does not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

from privacy_adaptive import project_onto_activations

from vsplit.privacy.defenses import make_defense
from vsplit.protocol.training.hooks import StepInfo


@pytest.mark.parametrize(("options", "components", "clean"), [
    ("orthogonal=true", None, True), ("orthogonal=4", 4, True), ("centred=true", None, False),
])
def test_the_projection_onto_the_activations_is_clean_exactly_when_the_noise_is_orthogonal(options, components, clean):
    generator = torch.Generator().manual_seed(0)
    grads = torch.randn(256, 8, generator=generator, dtype=torch.float64)
    activations = torch.randn(256, 16, generator=generator, dtype=torch.float64).relu()
    info = StepInfo(party="p", epoch=0, step=0, rows=None, activations=activations)
    defense = make_defense(f"max_norm:{options}+clip_noise:quantile=1,noise_multiplier=0.5,{options}")
    received = defense.hooks(feature_parties=["p"], seed=0).gradient_hooks
    sent = grads
    for hook in received:
        sent = hook(sent, info)
    assert float((sent - grads).abs().max()) > 0.1  # noisy as received
    gap = project_onto_activations(sent, activations, components) - project_onto_activations(grads, activations,
                                                                                             components)
    assert (float(gap.abs().max()) < 1e-9) is clean
