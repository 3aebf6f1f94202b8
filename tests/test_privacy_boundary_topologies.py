"""Privacy boundaries of vanilla and U-shaped splits, by tapping every encoded frame.

U-shaped: no frame the client sends holds its rows, labels or predictions, so the server never receives any of them.
Vanilla: no frame the client sends holds its raw rows or record IDs (the labels sit with the server)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from _leaks import leaks

from vsplit.estimator import SplitClassifier
from vsplit.protocol.training.messages import Activations, EpochEnd, Gradients, Ready, TrainingPlan


def pooled(views: dict[str, pd.DataFrame]) -> pd.DataFrame:
    return views["bank"].merge(views["partner"], on="customer_id")


def assert_no_rows_or_ids(frames, sender: str, table: pd.DataFrame) -> None:
    spend = table["spend"].to_numpy()[:60]  # lognormal: distinctive, never 0 or 1
    ids = [s.encode() for s in table["customer_id"]]
    sent = [(m, f) for s, _, m, f in frames if s == sender]
    assert sent, f"the tap saw no frame from {sender}"
    for msg, frame in sent:
        for marker in ids[:: max(1, len(ids) // 100)]:
            assert marker not in frame, f"{sender} sent a customer ID"
        assert not leaks(msg, frame, spend), f"{sender} sent a raw feature value"
        for text in (b"web", b"branch", b"phone", b"retired", b"student"):
            assert text not in frame, f"{sender} sent a raw category"


def test_u_shaped_client_sends_no_rows_labels_or_predictions(views, frames):
    table = pooled(views)
    clf = SplitClassifier(label_party="bank", label="y", topology="u_shaped", server="cloud", epochs=2,
                          batch_size=64, random_state=0).fit({"bank": table})
    proba = clf.predict_proba({"bank": table})[:, 1]
    assert {(s, r) for s, r, _, _ in frames} == {("bank", "cloud"), ("cloud", "bank")}
    assert {type(m) for s, _, m, _ in frames if s == "bank"} == {TrainingPlan, Activations, Gradients, EpochEnd}
    assert {type(m) for s, _, m, _ in frames if s == "cloud"} == {Ready, Activations, Gradients}
    assert_no_rows_or_ids(frames, "bank", table)
    labels = (table["y"].to_numpy() == "yes")
    aligned = labels[clf.rows_["bank"]]
    logits = torch.logit(torch.from_numpy(proba)).numpy()
    for _, recipient, msg, frame in frames:
        if recipient != "cloud":
            continue
        for encoded in (aligned.astype(np.uint8).tobytes(), aligned.astype(np.float32)[:32].tobytes()):
            assert encoded not in frame, "the client sent its labels"
        assert not leaks(msg, frame, [*proba[:40], *logits[:40]]), "the client sent a prediction"
        for text in (b"yes", b'"no"'):
            assert text not in frame, "the client sent a label value"


def test_vanilla_client_sends_no_raw_rows(views, frames):
    table = pooled(views)
    server = views["bank"][["customer_id", "y"]]
    client = table.drop(columns=["y"])
    SplitClassifier(label_party="bank", label="y", topology="vanilla", epochs=2, batch_size=64,
                    random_state=0).fit({"bank": server, "partner": client})
    assert {type(m) for s, _, m, _ in frames if s == "partner"} == {Ready, Activations}
    assert_no_rows_or_ids(frames, "partner", client)
