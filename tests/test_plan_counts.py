"""Crossing counts the planner reports, checked against counts worked out by hand from each model's shapes."""

from __future__ import annotations

import pytest
import torch
from plan_models import Tied, UNet, image, planned

from vsplit.plan import plan_cuts

# values per sample crossing each module cut, from the shapes in tests/plan_models.py
BLOCKNET = {
    "(input)": 3 * 64,
    "stem": 4 * 64, "act": 4 * 64,
    # inside block1 the block's input (4x8x8) is still needed by `out += identity`
    "block1.conv1": 2 * 256, "block1.bn1": 2 * 256, "block1.act": 2 * 256, "block1.conv2": 2 * 256,
    "block1.bn2": 2 * 256, "block1": 256,
    # inside block2 its input (4x8x8) waits for the 1x1 downsample, next to the 8x4x4 branch
    "block2.conv1": 128 + 256, "block2.bn1": 128 + 256, "block2.act": 128 + 256, "block2.conv2": 128 + 256,
    "block2.bn2": 128 + 256, "block2.downsample": 128 + 128, "block2": 128,
    "pool": 8, "fc": 3,
}
E1, E2, M, UP_M, D2, UP_D2 = 4 * 64, 8 * 16, 8 * 4, 8 * 16, 4 * 16, 4 * 64
UNET = {
    "(input)": 3 * 64,
    "enc1.0": E1, "enc1": E1, "pool": 4 * 16 + E1, "enc2.0": E2 + E1, "enc2": E2 + E1,
    "pool@1": 8 * 4 + E2 + E1, "mid.0": M + E2 + E1, "mid": M + E2 + E1,
    "up": UP_M + E2 + E1,  # the upsampled bottleneck and both long skips
    "dec2.0": D2 + E1, "dec2": D2 + E1, "up@1": UP_D2 + E1, "dec1.0": 4 * 64, "dec1": 4 * 64, "head": 2 * 64,
}
Y1, Y3, Y5, Y8, Y11 = 4 * 64, 8 * 16, 8 * 4, 8 * 16, 4 * 64  # the outputs the neck and head read back
DETECTOR = {
    "(input)": 3 * 256,
    "model.0": 4 * 64,
    "model.1.cv1": 4 * 64, "model.1.m.0": 3 * 2 * 64, "model.1": Y1,  # C2f: two chunks and the conv's output
    "model.2": 8 * 16 + Y1,
    "model.3.cv1": 8 * 16 + Y1, "model.3.m.0": 3 * 4 * 16 + Y1, "model.3": Y3 + Y1,
    "model.4": 8 * 4 + Y3 + Y1,
    "model.5.cv1": 8 * 4 + Y3 + Y1, "model.5.m.0": 3 * 4 * 4 + Y3 + Y1,
    "model.5": Y5 + Y3 + Y1,  # after the backbone: its outputs at three depths
    "model.6": 8 * 16 + Y5 + Y3 + Y1, "model.7": 16 * 16 + Y5 + Y1,
    "model.8.cv1": 8 * 16 + Y5 + Y1, "model.8.m.0": 3 * 4 * 16 + Y5 + Y1, "model.8": Y8 + Y5 + Y1,
    "model.9": 8 * 64 + Y8 + Y5 + Y1, "model.10": 12 * 64 + Y8 + Y5,
    "model.11.cv1": 4 * 64 + Y8 + Y5, "model.11.m.0": 3 * 2 * 64 + Y8 + Y5, "model.11": Y11 + Y8 + Y5,
    "model.12.cv.0": 3 * 64 + Y8 + Y5, "model.12.cv.1": 3 * 64 + 3 * 16 + Y5, "model.12.cv.2": 3 * (64 + 16 + 4),
}
# embeddings of widths 3 and 4 over 2 code columns, 2 numeric columns, hidden 8, embedding 4
TABULAR = {"(input)": 2 + 2, "embeddings.0": 3 + 2 + 2, "embeddings.1": 3 + 4 + 2, "mlp.0": 8, "mlp.1": 8,
           "mlp": 4}


@pytest.fixture(scope="module")
def plans() -> dict:
    return {name: planned(name, "export")[2] for name in ("blocknet", "unet", "detector", "tabular")}


@pytest.mark.parametrize(("name", "expected"), [("blocknet", BLOCKNET), ("unet", UNET), ("detector", DETECTOR),
                                                ("tabular", TABULAR)])
def test_values_crossing_every_module_cut_match_hand_counts(plans, name, expected):
    plan = plans[name]
    assert plan.method == "export"
    got = {cut: plan.row(cut).values_forward for cut in expected}
    assert got == expected
    assert {row.after for row in plan.rows} - set(expected) <= {"model.12"}  # every cut is counted above


def test_cut_inside_a_residual_block_sends_the_block_input(plans):
    row = plans["blocknet"].row("block1.conv2")
    producers = sorted(t.producer for t in row.tensors)
    assert producers == ["act", "block1.conv2"]  # the block's input came from the stem's activation
    assert all(t.shape == [4, 4, 8, 8] for t in row.tensors)


def test_cut_after_backbone_sends_the_three_feature_maps_the_neck_and_head_read(plans):
    row = plans["detector"].row("model.5")
    assert sorted((t.producer, tuple(t.shape[1:])) for t in row.tensors) == [
        ("model.1.cv2", (4, 8, 8)), ("model.3.cv2", (8, 4, 4)), ("model.5.cv2", (8, 2, 2))]
    assert row.values_backward == row.values_forward  # every map is an activation with a gradient


def test_shared_activation_module_is_named_by_each_call_path(plans):
    names = {row.after for row in plans["blocknet"].rows} | {a for row in plans["blocknet"].rows for a in row.aliases}
    assert {"act", "block1.act", "block1.act@1", "block2.act", "block2.act@1"} <= names


def test_upsample_and_concat_cuts_are_dominated_and_convolutions_are_not(plans):
    unet, detector = plans["unet"], plans["detector"]
    assert unet.row("up").dominated and unet.row("up@1").dominated
    assert detector.row("model.9").dominated and detector.row("model.10").dominated
    assert not unet.row("dec1.0").dominated and not detector.row("model.5").dominated


def test_raw_input_gets_no_gradient_and_is_flagged(plans):
    tab = plans["tabular"]
    first = tab.row("(input)")
    assert first.raw_input_crosses and first.values_backward == 0
    emb = tab.row("embeddings.1")  # the numeric columns still cross untouched
    assert emb.raw_input_crosses and emb.values_backward == 3 + 4
    assert not tab.row("mlp.0").raw_input_crosses


def test_parameters_and_flops_split_between_the_halves(plans):
    plan = plans["unet"]
    total = sum(p.numel() for p in UNet().parameters())
    for row in plan.rows:
        assert row.client_params + row.server_params == total
    enc1 = plan.row("enc1.0")
    assert enc1.client_params == 3 * 4 * 9 + 4
    assert enc1.client_flops == 2 * (3 * 9) * 4 * 64  # 2 FLOPs per multiply-add of a 3x3 conv, per sample
    saved = [row.client_saved_bytes for row in plan.rows]
    assert saved == sorted(saved) and saved[0] == 0 < saved[-1]


def test_tied_weight_is_reported_as_shared_across_the_cut():
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    row = plan_cuts(Tied(), x).row("enc")
    assert row.shared_parameters == ["enc.weight"]


def test_op_granularity_names_every_op_and_keeps_module_names_as_aliases(plans):
    plan = plan_cuts(UNet(), image(4, 8), granularity="op")
    assert plan.row("op:0").aliases[-1] == "enc1.0"
    assert plan.row("up").values_forward == UNET["up"]
    assert len(plan.rows) > len(plans["unet"].rows)
