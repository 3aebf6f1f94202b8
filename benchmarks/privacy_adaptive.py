"""An attacker who knows the defense: direction scoring on the gradients projected onto the partner's own activations.

``orthogonal`` noise (``clip_noise`` and ``max_norm`` with ``orthogonal=true``) adds nothing, over each batch, along
the constant and along any coordinate of the activations the partner sent. The partner knows those activations, so
it can compute ``P G``, the projection (over the batch's examples) of the gradients it received onto the span of the
constant and its activations, and that part is the clean gradient's, with no noise at all. This benchmark scores
each batch's examples by the cosine of their row of ``P G`` with that of one known positive (the direction attack,
run on ``P G`` instead of ``G``) and reports its leak AUC next to the direction attack on ``G``, both means over all
batches and epochs, for each setting and seed. The attacker does not know which subspace is clean, so it also
projects onto the constant and the activations' K leading principal directions of each batch, for K in
:data:`COMPONENTS` (fewer dimensions keep less noise where the noise is not orthogonal, and ``orthogonal=K`` leaves
exactly those clean); ``strongest_projected_leak_auc`` is the largest of them. With one direction every projected
row is the batch's mean gradient plus the same vector times the example's coordinate along the leading principal
direction of the activations, so the score mostly ranks examples by that coordinate: what the partner's own
activations say about the label, whatever noise the gradients carry::

    .venv/bin/python benchmarks/privacy_adaptive.py --seeds 0 1 2 \\
        --update benchmarks/results-privacy-audit.json      # key "adaptive_attack"

A setting is ``defense@recipe`` as in ``benchmarks/privacy_frontier.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from privacy_frontier import BASE, parse_setting

from vsplit.atomic import write_atomic
from vsplit.datasets import preset
from vsplit.privacy.attacks.label_leakage import DirectionScoring
from vsplit.privacy.audit import run_once
from vsplit.privacy.defenses.base import Combined, Defense, make_defense
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks

#: the numbers of leading principal directions the attacker also projects onto (None: all the activations)
COMPONENTS: tuple[int | None, ...] = (None, 1, 2, 4, 8)
#: the settings compared by default: the centred noise chosen before, and the orthogonal noise chosen now
DEFAULT_SETTINGS = (
    "max_norm+clip_noise:noise_multiplier=0.35,centred=true@lr=0.002,monitor=val_auc",
    "max_norm:orthogonal=true+clip_noise:noise_multiplier=0.35,orthogonal=true@lr=0.002,monitor=val_auc",
    "max_norm:orthogonal=4+clip_noise:noise_multiplier=0.35,orthogonal=4@lr=0.002,monitor=val_auc",
)


def project_onto_activations(grads: torch.Tensor, activations: torch.Tensor, components: int | None = None
                             ) -> torch.Tensor:
    """The rows of ``grads`` projected over the batch onto the span of the constant and ``activations``' columns (or
    their ``components`` leading principal directions, as ``orthogonal=K`` uses): the part of the received gradients
    that orthogonal noise leaves clean.

    Example:
        >>> acts = torch.randn(32, 3, dtype=torch.float64)
        >>> grads = torch.cat([acts[:, :1] * 2 + 1, torch.randn(32, 1, dtype=torch.float64)], dim=1)
        >>> projected = project_onto_activations(grads, acts)
        >>> bool(torch.allclose(projected[:, 0], grads[:, 0]))  # in the span: kept whole
        True
        >>> bool(projected[:, 1].norm() < grads[:, 1].norm())  # independent of it: mostly taken out
        True
    """
    rows = len(grads)
    columns = activations.reshape(rows, -1).double()
    if components is not None:
        columns = torch.linalg.svd(columns - columns.mean(dim=0, keepdim=True), full_matrices=False)[0][:, :components]
    q, _ = torch.linalg.qr(torch.cat([torch.ones(rows, 1, dtype=torch.float64), columns], dim=1))
    wide = grads.double()
    return q @ (q.T @ wide)


class _Recorder(Defense):
    """Runs last among the label party's gradient hooks: sees each gradient as sent, with its activations and labels;
    scores it with the direction attack as sent and as projected. Changes nothing."""

    name = "record"

    def __init__(self) -> None:
        super().__init__()
        self.received = DirectionScoring()
        self.projected = {k: DirectionScoring() for k in COMPONENTS}
        self.labels: dict[int, float] = {}

    def build(self, *, feature_parties: list[str], seed: int) -> TrainingHooks:
        def hook(values: torch.Tensor, info: StepInfo) -> torch.Tensor:
            if info.training and info.rows is not None and info.labels is not None and info.activations is not None:
                self.labels.update(zip(np.asarray(info.rows).tolist(), info.labels.numpy().tolist(), strict=True))
                self.received(values, info)
                for k, scoring in self.projected.items():
                    scoring(project_onto_activations(values, info.activations, k).float(), info)
            return values

        return TrainingHooks(gradient_hooks=[hook])

    def leaks(self) -> dict[str, float]:
        labels = np.zeros(max(self.labels) + 1)
        for row, label in self.labels.items():
            labels[row] = label
        by_k = {"all" if k is None else str(k): s.summary(labels).mean for k, s in self.projected.items()}
        return {"direction_leak_auc": self.received.summary(labels).mean, "projected_direction_leak_auc": by_k["all"],
                "projected_leak_auc_by_components": by_k, "strongest_projected_leak_auc": max(by_k.values())}


def measure(setting: str, seed: int) -> dict[str, Any]:
    """One training run of ``setting`` on bank_marketing with ``seed``: test AUC and both leaks."""
    defense, recipe = parse_setting(setting)
    recorder = _Recorder()
    combined = Combined([make_defense(defense), recorder])
    started = time.perf_counter()
    run = run_once(preset("bank_marketing", seed=seed), combined, seed=seed, attacks=(),
                   estimator={**BASE, "epochs": 10, "batch_size": 256, **recipe})
    return {"setting": setting, "seed": seed, "test_auc": run["test_auc"], **recorder.leaks(),
            "seconds": round(time.perf_counter() - started, 1)}


def _means(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The means over seeds of one setting's runs, the projections' per number of directions too."""
    keys = ("test_auc", "direction_leak_auc", "projected_direction_leak_auc", "strongest_projected_leak_auc")
    out: dict[str, Any] = {k: float(np.mean([r[k] for r in runs])) for k in keys}
    out["projected_leak_auc_by_components"] = {
        k: float(np.mean([r["projected_leak_auc_by_components"][k] for r in runs]))
        for k in runs[0]["projected_leak_auc_by_components"]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(DEFAULT_SETTINGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--update", default=None, help="put the results under the key adaptive_attack of this "
                        "earlier result file, keeping its other keys")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs = []
    for setting in args.settings:
        for seed in args.seeds:
            runs.append(measure(setting, seed))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    block = {
        "seeds": args.seeds, "load_average": [round(v, 2) for v in os.getloadavg()], "runs": runs,
        "means": {s: _means([r for r in runs if r["setting"] == s]) for s in args.settings},
    }
    result = json.loads(Path(args.update).read_text()) if args.update else {}
    result["adaptive_attack"] = block
    if args.update:
        write_atomic(args.update, (json.dumps(result, indent=2) + "\n").encode())
    print(json.dumps(block, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
