"""gap_noise: noise along the direction that separates the classes of each batch's gradients, then even norms."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vsplit.config.load import load_config
from vsplit.errors import ConfigError
from vsplit.privacy.audit import run_once
from vsplit.privacy.defenses import GapNoise, make_defense, sides
from vsplit.protocol.training.hooks import StepInfo

pytestmark = pytest.mark.usefixtures("one_thread")


def batch(n: int = 400, dim: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients as BCE makes them: (p - y) times a slowly varying d logit / d e; positives large and opposite."""
    g = torch.Generator().manual_seed(seed)
    labels = (torch.rand(n, generator=g) < 0.15).double()
    p = 0.1 + 0.05 * torch.rand(n, generator=g, dtype=torch.float64)
    direction = torch.tensor([1.0, 0.5, 0, 0, 0, 0], dtype=torch.float64)[:dim]
    jac = direction + 0.1 * torch.randn(n, dim, generator=g, dtype=torch.float64)
    return ((p - labels).unsqueeze(1) * jac).float(), labels.float()


def hook_of(defense: GapNoise, seed: int = 0):
    return defense.hooks(feature_parties=["partner"], seed=seed).gradient_hooks[0]


def info(labels: torch.Tensor) -> StepInfo:
    return StepInfo(party="partner", epoch=0, step=0, rows=None, labels=labels)


def test_noise_goes_only_along_the_gap_between_the_class_means():
    grads, labels = batch()
    noisy = hook_of(GapNoise(noise_multiplier=1.0, even_norms=False))(grads, info(labels))
    g = grads.double()
    u = g[labels > 0.5].mean(0) - g[labels < 0.5].mean(0)
    u = u / u.norm()
    added = noisy.double() - g
    across = added - (added @ u).unsqueeze(1) * u
    assert float(across.abs().max()) < 1e-5  # nothing in the other directions
    along = added @ u
    bound = torch.quantile(g.norm(dim=1), 0.95)
    assert abs(float(along.std() / bound) - 1.0) < 0.15  # noise_multiplier times the 95th-percentile norm
    # the same law for both classes: the label is not in the noise
    assert abs(float(along[labels > 0.5].std() / along[labels < 0.5].std()) - 1) < 0.3


def test_even_norms_gives_every_example_the_batchs_largest_expected_norm():
    grads, labels = batch(n=200)
    hook = hook_of(GapNoise(noise_multiplier=0.0, even_norms=True))
    squared = torch.stack([(hook(grads, info(labels)).double() ** 2).sum(1) for _ in range(300)]).mean(0)
    target = float((grads.double() ** 2).sum(1).max())
    assert float((squared / target - 1).abs().max()) < 0.35
    positives, negatives = squared[labels > 0.5].mean(), squared[labels < 0.5].mean()
    assert abs(float(positives / negatives) - 1) < 0.05


def test_needs_the_labels_and_keeps_the_last_gap_for_a_batch_of_one_class():
    grads, labels = batch()
    hook = hook_of(GapNoise(noise_multiplier=1.0, even_norms=False))
    with pytest.raises(ConfigError, match="needs the batch's labels"):
        hook(grads, StepInfo(party="partner", epoch=0, step=0, rows=None))
    negatives = labels < 0.5
    assert torch.equal(hook(grads[negatives], info(labels[negatives])), grads[negatives])  # no gap known yet
    hook(grads, info(labels))
    assert not torch.equal(hook(grads[negatives], info(labels[negatives])), grads[negatives])


def test_off_when_zero_on_as_configured_and_checked_like_every_defense():
    assert not GapNoise(noise_multiplier=0, even_norms=False).active
    assert GapNoise(noise_multiplier=0, even_norms=False).hooks(feature_parties=["p"], seed=0).gradient_hooks == ()
    configured = make_defense("gap_noise:noise_multiplier=0.6")
    assert configured.active and configured.noise_multiplier == 0.6 and configured.even_norms
    assert sides("gap_noise") == {"label"}
    bank = Path(__file__).resolve().parents[1] / "parties" / "bank" / "party.toml"
    config = load_config(bank, overrides=['privacy.defenses=["gap_noise:noise_multiplier=0.6"]'], check_files=False)
    assert config.privacy.defenses == ("gap_noise:noise_multiplier=0.6",)
    assert load_config(bank, check_files=False).privacy.defenses == ()  # off unless configured
    partner = bank.parents[1] / "partner" / "party.toml"
    with pytest.raises(ConfigError, match="gap_noise"):  # a label-party defense, refused at a feature party
        load_config(partner, overrides=['privacy.defenses=["gap_noise"]'], check_files=False)
    with pytest.raises(ConfigError, match="noise_multiplier must be >= 0"):
        make_defense("gap_noise:noise_multiplier=-1")
    with pytest.raises(ConfigError, match="quantile must be in"):
        make_defense("gap_noise:quantile=0")


def test_hides_the_labels_from_norm_and_direction_scoring_on_synthetic_data():
    from vsplit.privacy.audit import AuditData
    from vsplit.privacy.synthetic import make_imbalanced_views, split_views

    train, test = split_views(make_imbalanced_views(2500, seed=0))
    data = AuditData(name="synthetic", train=train, test=test, label_party="bank", label="y", positive_label=1)
    training = {"epochs": 5, "batch_size": 256, "lr": 3e-3}
    plain = run_once(data, "none", seed=0, estimator=training, attacks=("label_leakage",))
    defended = run_once(data, "gap_noise:noise_multiplier=1.5", seed=0, estimator=training, attacks=("label_leakage",))
    assert plain["direction_leak_auc"] > 0.95 and plain["norm_leak_auc"] > 0.9
    assert defended["norm_leak_auc"] < 0.6 and defended["direction_leak_auc"] < 0.65
    assert defended["cost.noise_to_signal"] > 1  # (its utility cost is measured on bank-full by the benchmark)
