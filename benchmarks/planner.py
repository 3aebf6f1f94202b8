"""Cut-layer planner benchmark; prints one JSON object.

Keys:
  load_before, load_after   1-minute load average (os.getloadavg) around the run; the machine is shared.
  first_export_seconds      the first torch.export of the process (imports and caches warm up), on the U-Net test model.
  plan_seconds              {test model: {"export": s, "record": s}}: median of --repeats plan_cuts calls per method
                            (graph capture, one measured run of the graph, every cut, the privacy proxy) on the
                            models of tests/plan_models.py at their test inputs.
  big                       a U-Net of at least 2 M parameters with four long skips (BigUNet below), input
                            --batch x 3 x 64 x 64: parameters, plan seconds per method, whether the two methods
                            agree on every cut, the least-traffic cut, and the full per-cut table (per sample:
                            values and bytes forward and back, client/server parameters and FLOPs, client saved
                            bytes, distance correlation, flags), float32, 100 Mbit/s, 20 ms, 1 M rows, batch 256.

Run: .venv/bin/python benchmarks/planner.py [--repeats 3] [--batch 8]
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
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from plan_models import CASES

from vsplit.plan import Link, plan_cuts


def _double(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(),
                         nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU())


class BigUNet(nn.Module):
    """U-Net 3 -> 36 -> 72 -> 144 -> 288 (bottleneck) and back, with a long skip at each of four depths."""

    def __init__(self, widths: tuple[int, ...] = (36, 72, 144, 288), classes: int = 2) -> None:
        super().__init__()
        self.down = nn.ModuleList()
        c = 3
        for w in widths[:-1]:
            self.down.append(_double(c, w))
            c = w
        self.pool = nn.MaxPool2d(2)
        self.mid = _double(c, widths[-1])
        self.ups = nn.ModuleList(nn.ConvTranspose2d(a, b, 2, stride=2)
                                 for a, b in zip(widths[:0:-1], widths[-2::-1], strict=True))
        self.dec = nn.ModuleList(_double(2 * b, b) for b in widths[-2::-1])
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = self.pool(x)
        x = self.mid(x)
        for up, dec, skip in zip(self.ups, self.dec, reversed(skips), strict=True):
            x = dec(torch.cat([up(x), skip], 1))
        return self.head(x)


def _seconds(model: nn.Module, inputs: tuple, method: str, repeats: int) -> tuple[float, object]:
    times, plan = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        plan = plan_cuts(model, inputs, method=method)
        times.append(time.perf_counter() - start)
    return statistics.median(times), plan


def _agree(a, b) -> bool:
    fields = ("values_forward", "values_backward", "client_params", "client_flops", "client_saved_bytes")
    return [(r.after, *(getattr(r, f) for f in fields)) for r in a.rows] == \
        [(r.after, *(getattr(r, f) for f in fields)) for r in b.rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    out: dict = {"load_before": round(os.getloadavg()[0], 2), "torch": torch.__version__,
                 "threads": torch.get_num_threads()}
    make, inputs = CASES["unet"]
    start = time.perf_counter()
    plan_cuts(make(), inputs(), method="export")
    out["first_export_seconds"] = round(time.perf_counter() - start, 3)
    out["plan_seconds"] = {}
    for name, (make, inputs) in CASES.items():
        model, x = make().eval(), inputs()
        row = {}
        for method in ("export", "record"):
            try:
                row[method] = round(_seconds(model, x, method, args.repeats)[0], 3)
            except Exception as exc:  # export refuses the data-dependent model: say so
                row[method] = f"refused: {type(exc).__name__}"
        out["plan_seconds"][name] = row
    big = BigUNet().eval()
    x = (torch.randn(args.batch, 3, 64, 64, generator=torch.Generator().manual_seed(0)),)
    link = Link(bandwidth_mbps=100, rtt_ms=20, rows=1_000_000, batch_size=256)
    export_s, exported = _seconds(big, x, "export", 1)
    record_s, recorded = _seconds(big, x, "record", 1)
    plan = plan_cuts(big, x, link=link)
    best = plan.min_traffic()
    out["big"] = {
        "model": "BigUNet", "params": sum(p.numel() for p in big.parameters()), "input": [args.batch, 3, 64, 64],
        "plan_seconds": {"export": round(export_s, 3), "record": round(record_s, 3)},
        "methods_agree": _agree(exported, recorded), "cuts": len(plan.rows),
        "min_traffic": {"after": best.after, "bytes_forward": best.bytes_forward,
                        "client_flops": best.client_flops, "epoch_seconds": best.epoch_seconds},
        "link": link.to_dict(),
        "rows": [{
            "after": r.after, "tensors": len(r.tensors), "values_forward": r.values_forward,
            "bytes_forward": r.bytes_forward, "bytes_backward": r.bytes_backward, "client_params": r.client_params,
            "server_params": r.server_params, "client_flops": r.client_flops, "server_flops": r.server_flops,
            "client_saved_bytes": r.client_saved_bytes, "distance_correlation": r.distance_correlation,
            "epoch_seconds": r.epoch_seconds, "raw_input": r.raw_input_crosses, "dominated": r.dominated,
        } for r in plan.rows],
    }
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
