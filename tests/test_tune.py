"""The search: a partner's bound is never exceeded (a trial outside it is refused, naming the bound, and recorded),
and a study kept on disk resumes instead of starting again."""

from __future__ import annotations

import pytest

from vsplit.estimator import SplitClassifier
from vsplit.tune.space import SPACE, Knob, TrialRefused, check_trial

pytest.importorskip("optuna")

SMALL = {"numeric_bins": Knob("int", 4, 12), "lr": SPACE["lr"]}


def test_a_value_outside_a_partners_bound_is_refused_naming_the_bound():
    with pytest.raises(TrialRefused, match=r"numeric_bins = 12 is outside its bound \[4, 8\] \(tune.numeric_bins"):
        check_trial("partner", {"numeric_bins": 12}, {"numeric_bins": (4, 8)})
    check_trial("partner", {"numeric_bins": 8, "lr": 1.0}, {"numeric_bins": (4, 8)})  # inside; lr within the limits


def test_refused_trials_are_recorded_and_the_search_goes_on(views, one_thread, tmp_path):
    clf = SplitClassifier(label_party="bank", label="y", epochs=1, batch_size=128, random_state=0)
    journal = tmp_path / "study.log"
    result = clf.tune(views, n_trials=4, space=SMALL, bounds={"partner": {"numeric_bins": (4, 8)}}, storage=journal)
    states = [t["state"] for t in result.trials]
    assert len(states) == 4 and {"COMPLETE", "FAIL"} <= set(states), states
    for trial in result.trials:
        inside = trial["values"]["numeric_bins"] <= 8
        assert (trial["state"] == "COMPLETE") == inside, trial
        if not inside:
            assert "outside its bound [4, 8]" in trial["error"]
    assert result.best_values["numeric_bins"] <= 8 and 0.0 <= result.best_score <= 1.0

    again = clf.tune(views, n_trials=4, space=SMALL, bounds={"partner": {"numeric_bins": (4, 8)}}, storage=journal)
    assert again.trials == result.trials, "a resumed study ran its trials again"
