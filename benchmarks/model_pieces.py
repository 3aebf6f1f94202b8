"""Test metrics of the model pieces the topology engine plugs in, trained with plain PyTorch; prints one JSON object.

    python benchmarks/model_pieces.py [--seeds 0 1 2] [--merge-presets secretflow_bank default_credit]

Two experiments, each model trained on one thread with Adam (lr 1e-3, batch 64 for digits, 256 for the tables), up
to ``--epochs`` epochs with early stopping (patience 3) on the task's ``score`` over 10 % of the training rows held
out by the seed, the best epoch's weights kept:

- ``digits``: the ``digits`` preset (one client, 8x8 images), pixels scaled with ``TablePreprocessor("standard")``;
  a pixel MLP (64 -> 256 -> 64 -> 10) against ``ImageHead`` + ``MLP`` (256 -> 64 -> 10): the segments of a vanilla
  split, with the cut between them left out (split training equals this network trained whole:
  tests/test_oracle.py). Multiclass task: accuracy, macro AUC, log loss on the 360 test images.
- ``merges``: each two-party preset's pooled customers, one ``TabularMLP`` bottom per party (embedding 16), then
  ``TopModel`` with each merge (concat, sum, mean, attention). Binary task: test AUC and log loss.

Every figure is per seed, plus the mean; ``seconds`` is training time per model, ``best_epoch`` the epoch kept.
``load`` is the 1-minute load average when the run started (the machine may be shared).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from vsplit.data.preprocess import TablePreprocessor
from vsplit.datasets import preset
from vsplit.models.merge import MERGES
from vsplit.models.segments import MLP, ImageHead
from vsplit.models.tabular import TabularMLP
from vsplit.models.tasks import Task, make_task
from vsplit.models.top import TopModel

Forward = Callable[[str, torch.Tensor], torch.Tensor]  # (split, row indices) -> outputs


def train(model: nn.Module, forward: Forward, targets: dict[str, torch.Tensor], task: Task, *,
          seed: int, epochs: int, batch_size: int) -> tuple[float, int]:
    """Adam with early stopping on ``task.score`` of the "valid" rows; leaves the best weights in ``model``.

    Returns the training time in seconds and the best epoch (1-based).
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    order = torch.Generator().manual_seed(seed)
    best, best_state, best_epoch, waited = -np.inf, copy.deepcopy(model.state_dict()), 0, 0
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        for batch in torch.randperm(len(targets["train"]), generator=order).split(batch_size):
            loss = task.loss(forward("train", batch), targets["train"][batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        score = task.score(targets["valid"].numpy(), predict(model, forward, "valid", len(targets["valid"]), task))
        if score > best:
            best, best_state, best_epoch, waited = score, copy.deepcopy(model.state_dict()), epoch, 0
        elif (waited := waited + 1) >= 3:
            break
    model.load_state_dict(best_state)
    return time.perf_counter() - start, best_epoch


def predict(model: nn.Module, forward: Forward, split: str, n: int, task: Task) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        return task.predict(forward(split, torch.arange(n)))


def holdout(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation row indices: 10 % held out by ``seed``."""
    rows = np.random.default_rng(seed).permutation(n)
    cut = n // 10
    return np.sort(rows[cut:]), np.sort(rows[:cut])


class PixelMLP(nn.Module):
    """The baseline: an MLP on the 64 pixel columns."""

    def __init__(self) -> None:
        super().__init__()
        self.net = MLP(64, (256, 64), 10)

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        return self.net(num)


class HeadAndTail(nn.Module):
    """A vanilla split's two segments without the cut: the client's ImageHead, the server's MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.head = ImageHead()
        self.tail = MLP(self.head.out_width, (64,), 10)

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        return self.tail(self.head(cat, num))


def digits(seed: int, epochs: int) -> dict[str, dict[str, float]]:
    data = preset("digits", seed=seed)
    table, test = data.train["client"], data.test["client"]
    fit_rows, valid_rows = holdout(len(table), seed)
    pixels = [c for c in table.columns if c.startswith("px")]
    prep = TablePreprocessor(scaling="standard").fit(table.iloc[fit_rows][pixels])
    task = make_task("multiclass")
    y, info = task.encode(table[data.label], name=data.label)
    targets = {"train": y[fit_rows], "valid": y[valid_rows], "test": task.encode_with(test[data.label], info)}
    inputs = {"train": prep.transform(table.iloc[fit_rows][pixels]),
              "valid": prep.transform(table.iloc[valid_rows][pixels]), "test": prep.transform(test[pixels])}
    out: dict[str, dict[str, float]] = {}
    for name in ("pixel_mlp", "image_head_mlp"):
        torch.manual_seed(seed)
        model = PixelMLP() if name == "pixel_mlp" else HeadAndTail()

        def forward(split: str, rows: torch.Tensor, model: nn.Module = model) -> torch.Tensor:
            cat, num = inputs[split]
            return model(cat[rows], num[rows])

        seconds, best_epoch = train(model, forward, targets, task, seed=seed, epochs=epochs, batch_size=64)
        metrics = task.metrics(targets["test"].numpy(), predict(model, forward, "test", len(test), task))
        parameters = sum(p.numel() for p in model.parameters())
        out[name] = {**metrics, "seconds": seconds, "best_epoch": best_epoch, "parameters": parameters}
    return out


def merges(name: str, seed: int, epochs: int) -> dict[str, dict[str, float]]:
    data = preset(name, seed=seed)
    pooled = {split: data.pooled(split) for split in ("train", "test")}
    fit_rows, valid_rows = holdout(len(pooled["train"]), seed)
    splits = {"train": pooled["train"].iloc[fit_rows], "valid": pooled["train"].iloc[valid_rows],
              "test": pooled["test"]}
    task = make_task("binary")
    y, info = task.encode(pooled["train"][data.label], name=data.label, positive_label=data.positive_label)
    targets = {"train": y[fit_rows], "valid": y[valid_rows],
               "test": task.encode_with(pooled["test"][data.label], info)}
    inputs: dict[str, dict[str, tuple[torch.Tensor, torch.Tensor]]] = {s: {} for s in splits}
    shapes = {}
    for party, table in data.train.items():
        columns = [c for c in table.columns if c not in (data.id_column, data.label)]
        prep = TablePreprocessor(categorical=data.categorical[party], seed=seed).fit(splits["train"][columns])
        shapes[party] = (prep.cardinalities, prep.n_numeric)
        for split, rows in splits.items():
            inputs[split][party] = prep.transform(rows[columns])
    out: dict[str, dict[str, float]] = {}
    for merge in MERGES.names():
        torch.manual_seed(seed)
        bottoms = nn.ModuleDict(
            {p: TabularMLP(cardinalities=c, n_numeric=k, out_dim=16) for p, (c, k) in shapes.items()}
        )
        model = nn.ModuleDict({"bottoms": bottoms, "top": TopModel(widths=dict.fromkeys(shapes, 16), merge=merge)})

        def forward(split: str, rows: torch.Tensor, model: nn.ModuleDict = model) -> torch.Tensor:
            parts = {p: model["bottoms"][p](cat[rows], num[rows]) for p, (cat, num) in inputs[split].items()}
            return model["top"](parts)

        seconds, best_epoch = train(model, forward, targets, task, seed=seed, epochs=epochs, batch_size=256)
        metrics = task.metrics(targets["test"].numpy(), predict(model, forward, "test", len(splits["test"]), task))
        out[merge] = {"auc": metrics["auc"], "log_loss": metrics["log_loss"], "seconds": seconds,
                      "best_epoch": best_epoch}
    return out


def summarise(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, object]]:
    """Per model: each metric's per-seed values and their mean."""
    summary: dict[str, dict[str, object]] = {}
    for model in runs[0]:
        summary[model] = {}
        for key in runs[0][model]:
            values = [round(float(run[model][key]), 4) for run in runs]
            summary[model][key] = {"mean": round(float(np.mean(values)), 4), "per_seed": values}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--merge-presets", nargs="+", default=["secretflow_bank", "default_credit"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    report: dict[str, object] = {"load": round(os.getloadavg()[0], 2), "threads": 1, "seeds": args.seeds}
    report["digits"] = summarise([digits(seed, args.epochs) for seed in args.seeds])
    print("digits done", file=sys.stderr)
    report["merges"] = {}
    for name in args.merge_presets:
        report["merges"][name] = summarise([merges(name, seed, args.epochs) for seed in args.seeds])
        print(f"{name} done", file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
