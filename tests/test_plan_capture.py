"""How the planner gets the graph: torch.export on a copy, the recorded fallback, and the user's model untouched."""

from __future__ import annotations

import pytest
import torch
from plan_models import Detector, Gate, UNet, gate_inputs, image, planned

from vsplit.errors import ConfigError
from vsplit.plan import plan_cuts

FIELDS = ("values_forward", "values_backward", "client_params", "server_params", "client_flops", "server_flops",
          "client_saved_bytes", "raw_input_crosses", "dominated", "shared_parameters")


def _summary(plan, names):
    return {name: tuple(getattr(plan.row(name), f) for f in FIELDS) for name in names}


@pytest.mark.parametrize("name", ["blocknet", "unet", "detector", "tabular"])
def test_export_and_recorded_pass_agree_on_every_cut_both_find(name):
    exported, recorded = planned(name, "export")[2], planned(name, "record")[2]
    assert (exported.method, recorded.method) == ("export", "record")
    # the detector's head also assigns a buffer: export records those ops (its own last cut), the recorded pass not
    shared = ({r.after for r in exported.rows} & {r.after for r in recorded.rows}) - {"model.12"}
    assert len(shared) >= len(recorded.rows) - 1
    assert _summary(exported, shared) == _summary(recorded, shared)


def test_data_dependent_branch_falls_back_to_recording_the_branch_taken():
    up, down = planned("gate")[2], plan_cuts(Gate(bias=-1.0), gate_inputs())
    assert up.method == down.method == "record"
    assert "torch.export refused" in up.note
    assert [r.after for r in up.rows] == ["(input)", "fc1", "pos", "out_pos"]
    assert [r.after for r in down.rows] == ["(input)", "fc1", "neg", "out_neg"]
    assert up.row("out_pos").values_forward == 2 + 6  # both dict entries are outputs: logits and hidden
    assert down.row("out_neg").values_forward == 2 + 5


def test_dict_output_is_handled_by_export():
    plan = plan_cuts(Gate(data_dependent=False), torch.randn(4, 4))
    assert plan.method == "export"
    assert plan.row("pos").values_forward == 6 and plan.row("out_pos").values_forward == 8


def test_forcing_export_on_a_data_dependent_model_says_what_to_do():
    with pytest.raises(ConfigError, match="method='record'"):
        plan_cuts(Gate(), torch.randn(4, 4), method="export")


def test_users_model_is_unchanged_and_still_runs_after_planning():
    torch.manual_seed(0)
    model = Detector()  # its head assigns a buffer during forward: export would leave a fake tensor there
    before = {k: v.clone() for k, v in model.state_dict().items()}
    training = [m.training for m in model.modules()]
    x = image(4, 16)
    plan_cuts(model, x, method="export")
    plan_cuts(model, x, method="record")
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) and type(after[k]) is torch.Tensor for k in before)
    assert [m.training for m in model.modules()] == training
    out = model(x)  # the next eager forward works
    assert [tuple(o.shape) for o in out] == [(4, 3, 8, 8), (4, 3, 4, 4), (4, 3, 2, 2)]


def test_input_the_model_rejects_gives_a_clear_error():
    with pytest.raises(ConfigError, match=r"rejected example inputs of shapes \[\(4, 5, 8, 8\)\]"):
        plan_cuts(UNet(), torch.randn(4, 5, 8, 8))


def test_unknown_granularity_and_method_list_the_valid_ones():
    with pytest.raises(ConfigError, match="'module', 'op'"):
        plan_cuts(UNet(), image(4, 8), granularity="layer")
    with pytest.raises(ConfigError, match="'auto', 'export', 'record'"):
        plan_cuts(UNet(), image(4, 8), method="jit")
