"""What each compression codec saves on the wire and costs in test AUC; prints one JSON object.

    python benchmarks/compression.py [--preset bank_marketing] [--seeds 0 1 2] [--widths 16 64 256] [--frames-only]

Output: {"frames": {"<kind>_256x<width>": {"<codec>": bytes of its encoded frame / bytes of the float32 frame}},
"training": {"<preset>": {"<codec>": {"auc": mean test AUC, "auc_delta": its difference from "none",
"bytes_per_epoch": {party: bytes it sent per epoch}, "bytes_ratio": {party: ratio to "none"}}}}}. Frames are one
batch of 256 rows of activations or gradients as vsplit.transport.codec encodes it (header included, no TLS).
Training uses SplitClassifier's defaults (every party compresses what it sends with the codec; top-k applies to
gradients only, so a partner's activations stay float32) on the preset's fixed split, metrics on the test customers
every party knows; bytes are the frames each party sent in training and validation (pump counts), divided by the
epochs run.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from vsplit.datasets import preset
from vsplit.estimator import SplitClassifier
from vsplit.evaluation import shared_test_views
from vsplit.models.recipe import PLAIN
from vsplit.protocol.training.compression import Compressor
from vsplit.protocol.training.messages import TRAIN
from vsplit.transport import codec

CODECS = [("none", False), ("float16", False), ("bfloat16", False), ("int8", False), ("int8", True),
          ("topk_0.1", False), ("topk_0.1", True)]


def label(name: str, feedback: bool) -> str:
    return name + ("+error_feedback" if feedback else "")


def frame_ratios(widths: list[int]) -> dict[str, dict[str, float]]:
    out = {}
    for width in widths:
        x = np.random.default_rng(width).normal(size=(256, width)).astype(np.float32)
        for kind in ("activations", "gradients"):
            sizes = {}
            for name, _ in CODECS:
                compressor = Compressor(name)
                if kind == "activations" and name.startswith("topk"):
                    continue  # top-k sends activations as float32
                msg = compressor.pack_activations(0, 0, TRAIN, 0, 0, x) if kind == "activations" else (
                    compressor.pack_gradients(0, 0, 0, 0, x))
                sizes[name] = len(codec.encode(msg, session=b"s" * 16, seq=0))
            out[f"{kind}_256x{width}"] = {name: round(size / sizes["none"], 4) for name, size in sizes.items()}
    return out


def training(name: str, seeds: list[int]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for codec_name, feedback in CODECS:
        aucs, sent = [], {}
        for seed in seeds:
            data = preset(name, seed=seed)
            # PLAIN: the network results-compression.json was measured with (the default before issue 25's recipe)
            clf = SplitClassifier(**PLAIN, label_party=data.label_party, label=data.label, id_column=data.id_column,
                                  positive_label=data.positive_label, random_state=seed, compression=codec_name,
                                  error_feedback=feedback)
            clf.fit(data.train)
            test = shared_test_views(data.test, label_party=data.label_party, id_column=data.id_column)
            aucs.append(clf.evaluate(test)["auc"])
            epochs = len(clf.history_)
            for party, pump in clf.pumps_.items():
                sent.setdefault(party, []).append(pump.stats.total("sent") / epochs)
        key = label(codec_name, feedback)
        out[key] = {"auc": round(float(np.mean(aucs)), 4), "aucs": [round(a, 4) for a in aucs],
                    "bytes_per_epoch": {p: round(float(np.mean(v))) for p, v in sent.items()}}
        print(f"{key}: auc {out[key]['auc']:.4f}, bytes/epoch {out[key]['bytes_per_epoch']}", file=sys.stderr)
    base = out["none"]
    for result in out.values():
        result["auc_delta"] = round(result["auc"] - base["auc"], 4)
        sent = result["bytes_per_epoch"]
        result["bytes_ratio"] = {p: round(b / base["bytes_per_epoch"][p], 4) for p, b in sent.items()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="bank_marketing")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--widths", nargs="+", type=int, default=[16, 64, 256])
    parser.add_argument("--frames-only", action="store_true", help="skip training (a second instead of minutes)")
    args = parser.parse_args()
    report: dict = {"frames": frame_ratios(args.widths)}
    if not args.frames_only:
        report["training"] = {args.preset: training(args.preset, args.seeds)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
