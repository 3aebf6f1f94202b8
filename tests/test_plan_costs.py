"""What a cut costs: bytes by dtype, seconds over a link, budgets, the privacy proxy and the JSON form."""

from __future__ import annotations

import json

import pytest
import torch
from plan_models import UNet, image, planned, tabular, tabular_inputs

from vsplit.errors import ConfigError
from vsplit.plan import Link, plan_cuts
from vsplit.plan.privacy import distance_correlation


def test_float16_halves_the_bytes_of_floating_tensors_but_not_of_integer_codes():
    full = plan_cuts(tabular(), tabular_inputs())
    half = plan_cuts(tabular(), tabular_inputs(), dtype="float16")
    assert half.row("mlp.0").bytes_forward * 2 == full.row("mlp.0").bytes_forward == 8 * 4
    # at the raw input: two int64 codes stay 8 bytes each, two numeric columns drop from 4 to 2
    assert full.row("(input)").bytes_forward == 2 * 8 + 2 * 4
    assert half.row("(input)").bytes_forward == 2 * 8 + 2 * 2


def test_link_predicts_bytes_and_seconds_per_epoch():
    link = Link(bandwidth_mbps=100, rtt_ms=20, rows=1_000_000, batch_size=1000)
    row = plan_cuts(UNet(), image(4, 8), link=link).row("dec1.0")
    per_sample = row.bytes_forward + row.bytes_backward
    assert row.epoch_bytes == per_sample * 1_000_000
    assert row.epoch_seconds == pytest.approx(per_sample * 1e6 * 8 / 100e6 + 1000 * 0.020, rel=1e-3)


def test_raw_input_cut_pays_half_a_round_trip_per_step():
    link = Link(bandwidth_mbps=1000, rtt_ms=50, rows=100, batch_size=10)
    assert link.epoch_seconds(forward=0, backward=0) == pytest.approx(10 * 0.025)


@pytest.mark.parametrize("field", ["bandwidth_mbps", "rows", "batch_size"])
def test_link_rejects_non_positive_sizes(field):
    args = {"bandwidth_mbps": 100, "rtt_ms": 20, "rows": 10, "batch_size": 5} | {field: 0}
    with pytest.raises(ConfigError, match=field):
        Link(**args)


def test_unknown_dtype_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="float16"):
        plan_cuts(UNet(), image(4, 8), dtype="float8")


def test_min_traffic_and_best_under_a_client_budget():
    plan = planned("unet", "export")[2]
    best = plan.min_traffic()
    assert not best.raw_input_crosses and best.server_flops > 0
    assert all(best.traffic <= r.traffic for r in plan.rows if not r.raw_input_crosses and r.server_flops)
    assert plan.min_traffic(allow_whole_model=True).after == "head"
    small = plan.best_under(max_client_flops=plan.row("enc2.0").client_flops)
    assert small.client_flops <= plan.row("enc2.0").client_flops
    assert small.after == "enc1.0"  # the cheapest traffic the budget allows
    assert plan.best_under(max_client_params=10) is None


def test_privacy_proxy_is_one_for_the_raw_input_and_missing_for_tiny_batches():
    plan = planned("unet", "export")[2]
    assert plan.row("(input)").distance_correlation == pytest.approx(1.0)
    assert all(0 <= r.distance_correlation <= 1 for r in plan.rows)
    tiny = plan_cuts(UNet(), image(2, 8))
    assert all(r.distance_correlation is None for r in tiny.rows)


def test_distance_correlation_separates_dependent_from_independent_data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 5, generator=g)
    assert distance_correlation(x, torch.tanh(x @ torch.randn(5, 3, generator=g))) > 0.7
    assert distance_correlation(x, torch.randn(256, 3, generator=g)) < 0.35


def test_plan_is_json_ready():
    plan = plan_cuts(UNet(), image(4, 8), link=Link(bandwidth_mbps=10, rtt_ms=5, rows=100))
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["method"] == "export" and data["link"]["bandwidth_mbps"] == 10
    assert [r["after"] for r in data["rows"]] == [r.after for r in plan.rows]
    assert data["rows"][1]["tensors"][0]["shape"] == [4, 4, 8, 8]


def test_unknown_cut_name_lists_the_cuts():
    with pytest.raises(ConfigError, match=r"enc1\.0"):
        planned("unet", "export")[2].row("encoder")
