"""The pilot's pooled baseline trains with the party processes' torch threads (``train.threads``) and a progress bar:
with torch's default of one thread per core it ran 27 times slower on a busy 2-core machine (vsplit.runtime.threads)."""

from __future__ import annotations

import json

import pytest
import torch

from vsplit.config import load_config
from vsplit.datasets import preset
from vsplit.pilot import orchestrate
from vsplit.pilot.configs import write_missing_configs
from vsplit.runtime.progress import TqdmProgress


class _Stop(Exception):
    pass


def test_pooled_baseline_runs_with_the_parties_threads_and_a_bar(tmp_path, monkeypatch):
    data = preset("secretflow_bank", seed=0)
    configs = write_missing_configs(tmp_path, label=data.label, positive_label=data.positive_label)
    (tmp_path / "run" / "bank").mkdir(parents=True)
    (tmp_path / "run" / "bank" / "report.json").write_text(json.dumps({"baselines": {}, "seconds": {}}))
    config = load_config(configs["bank"], overrides=["train.threads=1"], check_files=False)
    seen = {}

    def fit(self, views):
        seen["threads"] = torch.get_num_threads()
        seen["bars"] = [c for c in self.callbacks if isinstance(c, TqdmProgress)]
        raise _Stop

    monkeypatch.setattr("vsplit.estimator.SplitClassifier.fit", fit)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        spec = orchestrate.PILOTS["secretflow-bank"]
        with pytest.raises(_Stop):
            orchestrate._add_centralized_baseline(tmp_path / "run", data, config, spec,
                                                  orchestrate.pilot_data(data, spec.kind), quiet=True)
        assert seen["threads"] == 1 and len(seen["bars"]) == 1
        assert torch.get_num_threads() == 2  # the pilot's own setting is given back
    finally:
        torch.set_num_threads(before)
