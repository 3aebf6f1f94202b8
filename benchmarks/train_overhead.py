"""Cost of the cut: seconds per epoch of split training vs. the same bottoms and top trained without it.

    python benchmarks/train_overhead.py [--batch-size N (default: RECIPE's)] [--epochs 2] [--repeats 12] \
        [--threads 1] [--out benchmarks/results-train-overhead.json]
    python benchmarks/train_overhead.py --console --repeats 4 --out benchmarks/results-train-overhead.json

``--console`` times only the party console's cost (docs/console.md): split epochs with the console's state as a
training callback, its server and sampler running and /api/state polled every second, against the same epochs
without; it adds ``console`` (``overhead_pct``, ...) to the results file and leaves its other keys as they are.

Both runs use the bank_marketing preset, the same model, seeds and batches; split training runs every party in this
process and moves every embedding and gradient through the codec and in-memory channels. The epoch time is the
median over epochs and repeats (validation switched off so only training steps are timed); each repeat is a new
fit, because the epoch time varies more between fits (where the allocator puts things) than between the epochs of
one, and the two modes are interleaved so machine noise hits both.

The model is the default recipe of benchmarks/quality.py (``RECIPE``: the split its quality table reports); the
estimator's plain defaults without numeric embeddings (the recipe before issue 25) are timed split as well:
``plain_split_epoch_s`` and ``recipe_over_plain_epoch_ratio``, what the better recipe costs per epoch. The recipe's
``networks`` (a bag of independently seeded networks) is left out: each network's epoch is the one timed here, and a
bag of ``k`` trains ``k`` of them.

Prints one JSON object with ``split_epoch_s``, ``centralized_epoch_s``, ``ratio`` and, for reference, plain PyTorch
loops over the same network and batches: ``bare_pytorch_epoch_s`` without the cut, ``bare_pytorch_split_epoch_s``
with it but without any messaging, and their ``bare_pytorch_ratio`` (what the cut itself costs: a second backward
pass and a second optimizer step).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import RECIPE

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.models.optim import make_optimizer
from vsplit.models.recipe import PLAIN as PLAIN_RECIPE
from vsplit.runtime.progress import EpochClock

#: the plain network, the estimator's default before issue 25 (vsplit.models.recipe.PLAIN; its schedule keys are
#: replaced by timed()'s)
PLAIN = {**PLAIN_RECIPE, "members": 1}


def timed(recipe: dict | None, *, batch_size: int, epochs: int) -> dict:
    """RECIPE with ``recipe``'s changes, ``epochs`` of ``batch_size`` and validation off (only steps are timed)."""
    params = {**RECIPE, **(recipe or {}), "batch_size": batch_size, "epochs": epochs, "validation_fraction": 0.0,
              "patience": None}
    params.pop("monitor", None)  # no validation rows: nothing to monitor
    params.pop("networks", None)  # one network's epoch: a bag of k networks runs k of them
    return params


def epoch_times(data, mode: str, *, batch_size: int, epochs: int, recipe: dict | None = None,
                extra: tuple = ()) -> list[float]:
    clock = EpochClock()
    SplitClassifier(
        label_party=data.label_party, label=data.label, positive_label=data.positive_label, mode=mode,
        random_state=0, alignment="join", callbacks=[clock, *extra],
        **timed(recipe, batch_size=batch_size, epochs=epochs),
    ).fit(data.train)
    return clock.seconds


def console_overhead(data, *, batch_size: int, epochs: int, repeats: int) -> dict:
    """Split epochs with the party's console on (its state as a training callback, its server and sampler threads
    running, a browser's poll of /api/state every second) and off, interleaved; the medians and the overhead."""
    import threading
    import urllib.request

    from vsplit.console.server import ConsoleSettings, live_views, start_console
    from vsplit.console.state import ConsoleState

    on, off = [], []
    for _ in range(repeats):
        off += epoch_times(data, "split", batch_size=batch_size, epochs=epochs)
        state = ConsoleState(party=data.label_party, role="label", topology="vertical", run_id="bench")
        server = start_console(live_views(state), ConsoleSettings())
        stop = threading.Event()

        def poll(url=server.url + "api/state", stop=stop) -> None:
            while not stop.wait(1.0):
                urllib.request.urlopen(url, timeout=5).read()

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            on += epoch_times(data, "split", batch_size=batch_size, epochs=epochs, extra=(state,))
        finally:
            stop.set()
            poller.join()
            server.close()
    m_on, m_off = statistics.median(on), statistics.median(off)
    return {"on_epoch_s": round(m_on, 4), "off_epoch_s": round(m_off, 4),
            "overhead_pct": round(100 * (m_on - m_off) / m_off, 2), "epochs_timed": len(on)}


def bare_pytorch_epochs(data, *, batch_size: int) -> tuple[float, float]:
    """Seconds of one epoch of plain PyTorch loops over the same network: without the cut, and with it.

    The loop with the cut detaches the partner's embeddings, runs the top model on them, hands their gradient back
    and steps two optimizers, as split training does, but moves nothing through messages: the floor that the
    messaging layer adds to. Both loops use the same fused Adam and batches as the estimator.
    """
    clf = SplitClassifier(label_party=data.label_party, label=data.label, positive_label=data.positive_label,
                          mode="centralized", random_state=0, alignment="join",
                          **timed(None, batch_size=batch_size, epochs=1))
    clf.fit(data.train)
    bank, rows = clf.label_party_, clf.rows_
    (partner_name, partner), = clf.feature_parties_.items()
    own, (own_cat, own_num) = bank.model, bank.rows_of(rows[bank.name])
    other, (other_cat, other_num) = partner.model, partner.rows_of(rows[partner_name])
    top = bank.top
    y = bank.labels[torch.from_numpy(rows[bank.name])]
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    batches = [order[i : i + batch_size] for i in range(0, len(y), batch_size)]
    loss_of = torch.nn.functional.binary_cross_entropy_with_logits

    def unsplit() -> float:
        opt = make_optimizer("adam", [*top.parameters(), *own.parameters(), *other.parameters()], lr=1e-3)
        start = time.perf_counter()
        for idx in batches:
            emb = {bank.name: own(own_cat[idx], own_num[idx]), partner_name: other(other_cat[idx], other_num[idx])}
            loss = loss_of(top(emb), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return time.perf_counter() - start

    def split() -> float:
        opt_bank = make_optimizer("adam", [*top.parameters(), *own.parameters()], lr=1e-3)
        opt_partner = make_optimizer("adam", other.parameters(), lr=1e-3)
        start = time.perf_counter()
        for idx in batches:
            sent = other(other_cat[idx], other_num[idx])
            leaf = sent.detach().requires_grad_()
            loss = loss_of(top({bank.name: own(own_cat[idx], own_num[idx]), partner_name: leaf}), y[idx])
            opt_bank.zero_grad(set_to_none=True)
            loss.backward()
            opt_bank.step()
            opt_partner.zero_grad(set_to_none=True)
            sent.backward(leaf.grad)
            opt_partner.step()
        return time.perf_counter() - start

    return unsplit(), split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=RECIPE.get("batch_size", 256))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here (atomically)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1, as a party's process: train.threads)")
    parser.add_argument("--console", action="store_true",
                        help="time only the party console's overhead (on vs off) and add it to --out as 'console'")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    data = preset("bank_marketing", seed=0)
    epoch_times(data, "split", batch_size=args.batch_size, epochs=1)  # warm-up: imports, allocator, kernels
    if args.console:
        figures = {**console_overhead(data, batch_size=args.batch_size, epochs=args.epochs, repeats=args.repeats),
                   "load_before": [round(x, 2) for x in load_before],
                   "load_after": [round(x, 2) for x in os.getloadavg()]}
        print(json.dumps(figures, indent=2))
        if args.out is not None:
            from vsplit.atomic import write_atomic

            kept = json.loads(args.out.read_text()) if args.out.is_file() else {}
            write_atomic(args.out, (json.dumps({**kept, "console": figures}, indent=2) + "\n").encode())
        return 0
    split, central, plain = [], [], []
    for _ in range(args.repeats):
        split += epoch_times(data, "split", batch_size=args.batch_size, epochs=args.epochs)
        central += epoch_times(data, "centralized", batch_size=args.batch_size, epochs=args.epochs)
        plain += epoch_times(data, "split", batch_size=args.batch_size, epochs=args.epochs, recipe=PLAIN)
    bare = [bare_pytorch_epochs(data, batch_size=args.batch_size) for _ in range(args.repeats)]
    bare_unsplit, bare_split = (statistics.median(b[i] for b in bare) for i in (0, 1))
    s, c, p = statistics.median(split), statistics.median(central), statistics.median(plain)
    text = json.dumps({
        "preset": "bank_marketing",
        "recipe": RECIPE,
        "batch_size": args.batch_size,
        "split_epoch_s": round(s, 4),
        "centralized_epoch_s": round(c, 4),
        "ratio": round(s / c, 3),
        "plain_split_epoch_s": round(p, 4),
        "recipe_over_plain_epoch_ratio": round(s / p, 3),
        "bare_pytorch_epoch_s": round(bare_unsplit, 4),
        "bare_pytorch_split_epoch_s": round(bare_split, 4),
        "bare_pytorch_ratio": round(bare_split / bare_unsplit, 3),
        "epochs_timed": len(split),
        "torch_threads": torch.get_num_threads(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }, indent=2)
    print(text)
    if args.out is not None:
        from vsplit.atomic import write_atomic

        write_atomic(args.out, (text + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
