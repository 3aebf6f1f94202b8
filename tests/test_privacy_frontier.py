"""The label-defense frontier's bookkeeping (benchmarks/privacy_frontier.py): setting strings, costs and the goal.

The training behind each point is the audit's (tests/test_privacy_audit.py); here ``audit`` is replaced by canned
runs, so the tests check how the frontier turns runs into costs, the Pareto front and ``meets_goal``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))

import privacy_frontier
from privacy_frontier import merge_frontier, parse_setting, run_frontier


def test_parse_setting_reads_recipe_values_and_layer_widths() -> None:
    assert parse_setting("max_norm+clip_noise:noise_multiplier=0.3,centred=true@lr=0.002,epochs=20") == (
        "max_norm+clip_noise:noise_multiplier=0.3,centred=true", {"lr": 0.002, "epochs": 20})
    assert parse_setting("none@bottom_hidden=128,top_hidden=64x32,dropout=0.1") == (
        "none", {"bottom_hidden": (128,), "top_hidden": (64, 32), "dropout": 0.1})
    assert parse_setting("none") == ("none", {})


#: test AUC and leaks per (setting, seed) that the fake audit returns
_RUNS = {
    "none": [0.92, 0.93], "none@lr=0.002": [0.925, 0.935],
    "d@lr=0.002": [0.916, 0.926],  # 0.4 points under `none`, 0.9 under its own recipe's `none`
}


def _fake_audit(preset, *, defenses, seeds, estimator, attacks, progress):
    setting = defenses[0] + ("@lr=0.002" if estimator.get("lr") == 0.002 else "")
    seed_list = range(seeds) if isinstance(seeds, int) else seeds
    runs = [{"seed": s, "test_auc": auc, "norm_leak_auc": 0.55, "direction_leak_auc": 0.59 if defenses[0] == "d"
             else 0.99, "leak_auc_chance": 0.546, "epochs_run": 10}
            for s, auc in zip(seed_list, _RUNS[setting], strict=True)]
    return SimpleNamespace(runs=runs)


def test_cost_is_against_both_baselines_and_the_goal_needs_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(privacy_frontier, "audit", _fake_audit)
    frontier = run_frontier("p", ["none@lr=0.002", "d@lr=0.002"], seeds=2, epochs=10, batch_size=256,
                            progress=lambda line: None)
    point = {p["setting"]: p for p in frontier["points"]}["d@lr=0.002"]
    assert point["cost_points"] == pytest.approx(0.4)
    assert point["cost_vs_own_recipe"] == pytest.approx(0.9)
    assert point["cost_vs_own_recipe_per_seed"] == pytest.approx([0.9, 0.9])
    assert point["leak_auc"] == pytest.approx(0.59) and point["meets_goal"]
    _RUNS["d@lr=0.002"] = [0.914, 0.924]  # 1.1 points under its own recipe's `none`: fails though 0.6 under `none`
    try:
        frontier = run_frontier("p", ["none@lr=0.002", "d@lr=0.002"], seeds=2, epochs=10, batch_size=256,
                                progress=lambda line: None)
    finally:
        _RUNS["d@lr=0.002"] = [0.916, 0.926]
    point = {p["setting"]: p for p in frontier["points"]}["d@lr=0.002"]
    assert point["cost_vs_own_recipe"] == pytest.approx(1.1) and not point["meets_goal"]
    assert frontier["meeting_goal"] == []


def test_merge_refuses_another_baseline() -> None:
    a = {"preset": "p", "seeds": 3, "epochs": 10, "batch_size": 256, "baseline_test_auc": 0.9, "points": []}
    with pytest.raises(ValueError, match="measure it again"):
        merge_frontier(a, {**a, "baseline_test_auc": 0.91})


def test_held_out_seeds_go_under_their_own_key_next_to_the_frontier(monkeypatch, tmp_path) -> None:
    import privacy_audit

    calls = []

    def fake_run_frontier(preset, settings, *, seeds, **kwargs):
        calls.append(seeds)
        monkeypatch.setattr(privacy_frontier, "audit", _fake_audit)
        return run_frontier(preset, settings, seeds=seeds, **kwargs)

    monkeypatch.setattr(privacy_audit, "run_frontier", fake_run_frontier)
    earlier = tmp_path / "results.json"
    earlier.write_text('{"settings": {"seeds": 3}, "frontier": {"seeds": 3, "points": []}}')
    args = ["--frontier-only", "--frontier-cache", "", "--update", str(earlier), "--frontier", "none@lr=0.002",
            "d@lr=0.002", "--held-out", "3", "4"]
    assert privacy_audit.main(args) == 0
    result = json.loads(earlier.read_text())
    assert calls == [[3, 4]]
    assert result["frontier"] == {"seeds": 3, "points": []} and result["settings"] == {"seeds": 3}  # kept as they were
    held = result["held_out"]
    assert held["seeds"] == [3, 4] and held["chosen_on_seeds"] == 3 and "plot" not in held
    point = {p["setting"]: p for p in held["points"]}["d@lr=0.002"]
    assert point["seed_list"] == [3, 4] and point["cost_vs_own_recipe"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="distinct"):
        run_frontier("p", ["none"], seeds=[3, 3], epochs=10, batch_size=256, progress=lambda line: None)
