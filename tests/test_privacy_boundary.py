"""No frame a feature party sends holds its raw values or record IDs; no frame the label party sends holds labels."""

from __future__ import annotations

import numpy as np
from _leaks import leaks

from vsplit.estimator import SplitClassifier
from vsplit.protocol.training.messages import Activations, EpochEnd, Gradients, Ready, TrainingPlan


def int_patterns(values: np.ndarray) -> list[bytes]:
    """The int64 bytes raw numbers would have on the wire, little-endian (float ones are for :func:`leaks`)."""
    return [np.int64(v).tobytes() for v in values if float(v).is_integer()]


def test_frames_hold_no_raw_values_ids_or_labels(views, frames):
    clf = SplitClassifier(candidates="network", label_party="bank", label="y", epochs=2, batch_size=64, random_state=0)
    clf.fit(views).predict_proba(views)
    assert frames, "the tap saw no frames"

    partner = views["partner"]
    distinctive_spend = partner["spend"].to_numpy()[:50]  # lognormal: unique, never 0/1
    id_bytes = [s.encode() for s in list(views["bank"]["customer_id"]) + list(partner["customer_id"])]
    labels_in_order = (views["bank"]["y"].to_numpy() == "yes").astype(np.uint8)
    aligned_labels = labels_in_order[clf.rows_["bank"]]

    kinds = {(s, type(m)) for s, _, m, _ in frames}
    assert kinds == {
        ("partner", Ready), ("partner", Activations), ("bank", TrainingPlan), ("bank", Gradients), ("bank", EpochEnd)
    }
    for sender, _, msg, frame in frames:
        for marker in id_bytes[:: max(1, len(id_bytes) // 200)]:
            assert marker not in frame, f"{sender} sent a customer ID"
        if sender == "partner":
            assert not leaks(msg, frame, distinctive_spend), "partner sent a raw feature value"
            for pattern in int_patterns(distinctive_spend):
                assert pattern not in frame, "partner sent a raw feature value"
            for text in (b"web", b"branch", b"phone"):
                assert text not in frame, "partner sent a raw category"
        else:
            assert aligned_labels.tobytes() not in frame, "bank sent the labels"
            assert labels_in_order.tobytes() not in frame, "bank sent the labels"
            for text in (b"yes", b'"no"'):
                assert text not in frame, "bank sent a label value"
    plan = next(m for s, _, m, _ in frames if isinstance(m, TrainingPlan))
    # the validation choice is stratified but carries no label: its correlation with the labels is small
    assert abs(np.corrcoef(plan.roles.astype(float), aligned_labels.astype(float))[0, 1]) < 0.1
