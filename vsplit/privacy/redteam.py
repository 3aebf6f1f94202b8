"""The hijacking red team on digits: FSHA runs and honest runs of a vanilla split, with the client's detectors.

Theory of operation. :func:`run_split` trains one vanilla split of an image study on the real engine: the client
runs the digits CNN, the server either the honest default top or :class:`~vsplit.privacy.attacks.fsha.FshaServer`.
The client's detectors (:mod:`vsplit.privacy.detectors`) observe every gradient it receives. With ``stop=False``
they only record, so one run tells when each detector *would* have fired while the attack's reconstruction quality
is measured at every step; with ``stop=True`` the first detection ends the run with a
:class:`~vsplit.errors.PrivacyAlarm` before the client sends its next activations. SplitGuard needs canary rows
(:func:`~vsplit.privacy.detectors.splitguard.plant_canaries`): they are planted whenever it is among the detectors,
and the other detectors leave them out. SplitOut's warm-up trains copies of the client's initial model and a
surrogate of the server's layers on the client's own rows before training.

A reconstruction *leaks* once it beats what the server could draw knowing nothing of the image: the mean public image
(on 8x8 digits that guess already scores SSIM 0.55, above He et al.'s 0.3, so both thresholds are reported).

Example:
    >>> from vsplit.privacy.image_data import image_study
    >>> out = run_split(image_study("digits", seed=0), seed=0, epochs=1, attack=True,
    ...                 detectors=["gradient_scrutinizer"])
    >>> out["detections"]["gradient_scrutinizer"]["step"] is not None, out["steps"] > 10
    (True, True)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from vsplit.data.preprocess import TablePreprocessor
from vsplit.errors import PrivacyAlarm
from vsplit.models.segments import ImageHead
from vsplit.privacy.attacks.fsha import FshaServer
from vsplit.privacy.detectors import NAMES as DETECTOR_NAMES
from vsplit.privacy.detectors.base import Detector, aligned
from vsplit.privacy.detectors.registry import make_detector
from vsplit.privacy.detectors.splitguard import plant_canaries
from vsplit.privacy.detectors.splitout import SplitOut, default_surrogates
from vsplit.privacy.hooks import merge_hooks
from vsplit.privacy.image_data import ImageStudy
from vsplit.privacy.images import UNRECOGNISABLE, quality

#: Steps at which FSHA's reconstructions are kept for the picture.
SNAPSHOTS = (0, 10, 50, 100, 200, 500, 1000)


def _client_model(seed: int, study: ImageStudy) -> ImageHead:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ImageHead(shape=study.shape)


def run_split(
    study: ImageStudy,
    *,
    seed: int,
    epochs: int,
    attack: bool,
    detectors: Sequence[str | Detector] = DETECTOR_NAMES,
    stop: bool = False,
    canary_fraction: float = 0.1,
    warm_up_epochs: int = 4,
    batch_size: int = 64,
    lr: float = 1e-3,
    snapshots: Sequence[int] = SNAPSHOTS,
    fsha: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One vanilla split on the study's private rows, honest or under FSHA, with the detectors; a dict of results.

    ``detections[name]`` holds each detector's first detection (``step``: gradient batches received before it; None
    if it never fired) and, under FSHA, ``history`` the quality of what the server reconstructed per step. With
    ``stop=True`` the first detection ends training: ``error`` holds the :class:`~vsplit.errors.PrivacyAlarm` that
    ``fit`` raised and ``alarm`` its message. ``fsha`` passes options to
    :class:`~vsplit.privacy.attacks.fsha.FshaServer` (``lr``, ``gradient_penalty``, ...).
    """
    from vsplit.estimator import SplitClassifier

    chosen = [make_detector(d) for d in detectors]
    for d in chosen:
        d.stop = stop
    client_table, server_table = study.private.drop(columns=[study.label]), study.private[[study.id_column,
                                                                                           study.label]]
    canary_ids: list[str] = []
    if any(d.name == "splitguard" for d in chosen):
        client_table, server_table, canary_ids = plant_canaries(
            client_table, server_table, fraction=canary_fraction, seed=seed, label=study.label,
            classes=study.classes, id_column=study.id_column,
        )
    ids = client_table[study.id_column]
    sent_labels = server_table.set_index(study.id_column)[study.label].reindex(ids).to_numpy()
    labels = aligned(ids, sent_labels)
    canaries = aligned(ids, ids.isin(canary_ids).to_numpy())
    head = _client_model(seed, study)
    for d in chosen:
        d.bind(labels=labels, canaries=canaries)
        if isinstance(d, SplitOut):
            prep = TablePreprocessor(scaling="standard", seed=seed).fit(client_table.drop(columns=[study.id_column]))
            inputs = prep.transform(client_table.drop(columns=[study.id_column]))
            surrogates = default_surrogates(head.out_width, len(study.classes), seed=seed)
            own = np.flatnonzero(~ids.isin(canary_ids).to_numpy())
            d.warm_up(copy.deepcopy(head), [t[own] for t in inputs], sent_labels[own], surrogates=surrogates,
                      learning_rates=(lr, 3 * lr), epochs=warm_up_epochs, batch_size=batch_size, seed=seed)
    truth = aligned(ids, study.images(client_table))
    segments: dict[str, Any] = {"bottom": head}
    hooks = merge_hooks(*(d.hooks(study.client) for d in chosen))
    attacker = None
    if attack:
        public = torch.from_numpy(study.images(study.public)).float().unsqueeze(1)
        attacker = FshaServer(public=public, width=head.out_width, n_classes=len(study.classes), seed=seed,
                              truth=truth, snapshot_steps=snapshots, **dict(fsha or {}))
        segments["top"] = attacker.top()
        hooks = merge_hooks(hooks, attacker.hooks())
    clf = SplitClassifier(
        label_party=study.server, label=study.label, task="multiclass", topology="vanilla", epochs=epochs,
        batch_size=batch_size, lr=lr, embedding_width=head.out_width, scaling="standard", segments=segments,
        hooks=hooks, patience=None, random_state=seed, alignment="join",
        reset_modules=False,  # the client's head as built above: SplitOut warmed up a copy of these weights
    )
    views = {study.server: server_table, study.client: client_table}
    alarm: PrivacyAlarm | None = None
    try:
        clf.fit(views)
    except PrivacyAlarm as exc:
        alarm = exc
    out: dict[str, Any] = {"seed": seed, "attack": "fsha" if attack else "none", "canaries": len(canary_ids),
                           "steps": max((d.batches for d in chosen), default=0),
                           "stopped_by": None if alarm is None else alarm.detection.detector}  # type: ignore[union-attr]
    if alarm is None:
        out["accuracy"] = float(clf.evaluate(study.views("vanilla", study.test))["accuracy"])
    out["detections"] = {d.name: _detection(d) for d in chosen}
    if attacker is not None:
        out["steps"] = attacker.steps
        mean_image = np.broadcast_to(study.images(study.public).mean(0), truth.shape)
        prior = quality(truth, mean_image)["ssim"]
        out |= {
            "history": attacker.history,
            "prior_ssim": prior,
            "first_step_ssim_0.3": attacker.first_step_reaching(UNRECOGNISABLE),
            "first_step_beating_prior": attacker.first_step_reaching(prior),
            "final_ssim": attacker.history[-1]["ssim"] if attacker.history else None,
            "snapshots": attacker.snapshots,
        }
    if alarm is not None:
        out["alarm"], out["error"] = str(alarm), alarm
    return out


def _detection(d: Detector) -> dict[str, Any]:
    first = d.first
    return {"step": None if first is None else first.step, "evidence": None if first is None else first.evidence,
            "batches_seen": d.batches}


def summarise_detectors(fsha: Sequence[dict[str, Any]], honest: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per detector: detection steps on the FSHA runs (median), whether each came before the reconstructions
    leaked (beat the prior; and reached SSIM 0.3), and false alarms over the honest runs."""
    names = list(dict.fromkeys(n for run in [*fsha, *honest] for n in run["detections"]))
    out: dict[str, Any] = {}
    for name in names:
        steps = [run["detections"][name]["step"] for run in fsha]
        found = [s for s in steps if s is not None]
        before_prior = [s is not None and (r["first_step_beating_prior"] is None or s < r["first_step_beating_prior"])
                        for s, r in zip(steps, fsha, strict=True)]
        before_03 = [s is not None and (r["first_step_ssim_0.3"] is None or s < r["first_step_ssim_0.3"])
                     for s, r in zip(steps, fsha, strict=True)]
        alarms = [run["detections"][name]["step"] for run in honest]
        out[name] = {
            "fsha_runs": len(fsha),
            "fsha_detected": len(found),
            "detection_steps": steps,
            "median_detection_step": float(np.median(found)) if found else None,
            "detected_before_beating_prior": int(sum(before_prior)),
            "detected_before_ssim_0.3": int(sum(before_03)),
            "honest_runs": len(honest),
            "false_alarms": sum(a is not None for a in alarms),
            "false_alarm_steps": [a for a in alarms if a is not None],
        }
    return out
