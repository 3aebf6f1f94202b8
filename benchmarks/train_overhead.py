"""Cost of the cut: seconds per epoch of split training vs. the same bottoms and top trained without it.

    python benchmarks/train_overhead.py [--batch-size 256] [--epochs 4] [--repeats 3]

Both runs use the bank_marketing preset, the same model, seeds and batches; split training runs every party in this
process and moves every embedding and gradient through the codec and in-memory channels. The epoch time is the
median over epochs and repeats (validation switched off so only training steps are timed); the two modes are
interleaved so machine noise hits both. Prints one JSON object with ``split_epoch_s``, ``centralized_epoch_s``,
``ratio`` and, for reference, ``bare_pytorch_epoch_s`` (a plain PyTorch loop over the unsplit network).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.runtime.progress import EpochClock


def epoch_times(data, mode: str, *, batch_size: int, epochs: int) -> list[float]:
    clock = EpochClock()
    SplitClassifier(
        label_party=data.label_party, label=data.label, positive_label=data.positive_label, mode=mode,
        batch_size=batch_size, epochs=epochs, validation_fraction=0.0, patience=None, random_state=0,
        alignment="join", callbacks=[clock],
    ).fit(data.train)
    return clock.seconds


def bare_pytorch_epoch(data, *, batch_size: int) -> float:
    """One epoch of a plain PyTorch loop over the same unsplit network, for reference."""
    clf = SplitClassifier(label_party=data.label_party, label=data.label, positive_label=data.positive_label,
                          mode="centralized", epochs=1, validation_fraction=0.0, patience=None, random_state=0,
                          alignment="join")
    clf.fit(data.train)
    bank = clf.label_party_
    rows = clf.rows_
    parts = {bank.name: (bank.model, bank.rows_of(rows[bank.name]))}
    parts.update({n: (p.model, p.rows_of(rows[n])) for n, p in clf.feature_parties_.items()})
    top = bank.top
    y = bank.labels[torch.from_numpy(rows[bank.name])]
    params = [*top.parameters(), *(q for m, _ in parts.values() for q in m.parameters())]
    opt = torch.optim.Adam(params, lr=1e-3)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    start = time.perf_counter()
    for i in range(0, len(y), batch_size):
        idx = order[i : i + batch_size]
        emb = {n: m(c[idx], x[idx]) for n, (m, (c, x)) in parts.items()}
        loss = torch.nn.functional.binary_cross_entropy_with_logits(top(emb), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = preset("bank_marketing", seed=0)
    epoch_times(data, "split", batch_size=args.batch_size, epochs=1)  # warm-up: imports, allocator, kernels
    split, central = [], []
    for _ in range(args.repeats):
        split += epoch_times(data, "split", batch_size=args.batch_size, epochs=args.epochs)
        central += epoch_times(data, "centralized", batch_size=args.batch_size, epochs=args.epochs)
    bare = [bare_pytorch_epoch(data, batch_size=args.batch_size) for _ in range(args.repeats)]
    s, c = statistics.median(split), statistics.median(central)
    print(json.dumps({
        "preset": "bank_marketing",
        "batch_size": args.batch_size,
        "split_epoch_s": round(s, 4),
        "centralized_epoch_s": round(c, 4),
        "ratio": round(s / c, 3),
        "bare_pytorch_epoch_s": round(statistics.median(bare), 4),
        "epochs_timed": len(split),
        "torch_threads": torch.get_num_threads(),
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
