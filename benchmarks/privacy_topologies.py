"""Privacy in every topology: inversion by cut depth, FSHA against the client's detectors, U-shaped label leakage,
and the bank-marketing label-defense search.

    .venv/bin/python benchmarks/privacy_topologies.py            # the full run (about an hour on two cores)
    .venv/bin/python benchmarks/privacy_topologies.py --quick    # a few minutes: one seed, small sizes
    .venv/bin/python benchmarks/privacy_topologies.py --only detectors --fsha-runs 5 --honest-runs 10

Prints one JSON object with keys ``inversion`` (per defense and cut: accuracy and its cost, white-box and black-box
MSE / PSNR / SSIM, means over seeds), ``detectors`` (per detector: detection step on each FSHA run and the median,
whether it came before the reconstructions reached SSIM 0.3 and before they beat the mean public image, false alarms
over the honest runs; the FSHA SSIM curve), ``u_shaped_labels`` (norm and direction leak AUCs and the AUC cost per
label defense, U-shaped bank_marketing) and ``bank_marketing_label_defense`` (vertical bank_marketing: leak AUCs and
AUC cost per defense setting, the Pareto front and which settings reach both leaks <= 0.60 at <= 1.0 AUC point),
plus the settings. Writes docs/img/inversion_by_cut.png and docs/img/fsha.png (``--img-dir``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from vsplit.privacy.topology_audit import IMAGE_DEFENSES, LABEL_DEFENSES, ImageAuditSizes, vanilla_image_audit

#: The vertical bank_marketing settings searched for a label defense within 1.0 AUC point.
BANK_SETTINGS = (
    "none",
    "clip_noise",
    "clip_noise:noise_multiplier=0.6",
    "clip_noise:noise_multiplier=0.8",
    "clip_noise:quantile=0.5,noise_multiplier=0.8",
    "marvell",
    "marvell:power=3",
    "marvell:power=5",
    "max_norm+clip_noise:noise_multiplier=0.3",
    "max_norm+clip_noise:noise_multiplier=0.5",
)
SECTIONS = ("inversion", "detectors", "u_shaped_labels", "bank_marketing_label_defense")
TARGET_LEAK, TARGET_COST = 0.60, 1.0


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def pareto(rows: list[dict[str, Any]]) -> list[str]:
    """Settings no other setting beats on all of AUC cost, norm leak and direction leak."""
    def key(r: dict[str, Any]) -> tuple[float, float, float]:
        return (r["test_auc_cost"], r["norm_leak_auc"], r["direction_leak_auc"])

    front = []
    for r in rows:
        dominated = any(all(a <= b for a, b in zip(key(o), key(r), strict=True)) and key(o) != key(r) for o in rows)
        if not dominated:
            front.append(r["defense"])
    return front


def bank_search(args: argparse.Namespace) -> dict[str, Any]:
    from vsplit.privacy import audit

    report = audit("bank_marketing", defenses=args.bank_settings, seeds=args.bank_seeds, epochs=args.bank_epochs,
                   batch_size=args.bank_batch_size, attacks=["label_leakage"], progress=log)
    keys = ("test_auc", "test_auc_sd", "test_auc_cost", "norm_leak_auc", "norm_leak_auc_sd", "direction_leak_auc",
            "direction_leak_auc_sd", "leak_auc_chance", "n_seeds")
    rows = [{"defense": r["defense"], **{k: r.get(k) for k in keys}} for r in report.rows()]
    for r in rows:
        r["test_auc_cost_points"] = 100 * r["test_auc_cost"]
        r["meets_target"] = bool(r["defense"] != "none" and r["norm_leak_auc"] <= TARGET_LEAK
                                 and r["direction_leak_auc"] <= TARGET_LEAK and 100 * r["test_auc_cost"] <= TARGET_COST)
    return {
        "rows": rows,
        "pareto_front": pareto([r for r in rows if r["defense"] != "none"]),
        "meeting_target": [r["defense"] for r in rows if r["meets_target"]],
        "target": {"leak_auc_at_most": TARGET_LEAK, "auc_cost_points_at_most": TARGET_COST},
        "runs": report.runs,
        "settings": {"seeds": args.bank_seeds, "epochs": args.bank_epochs, "batch_size": args.bank_batch_size},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few minutes: one seed and small sizes everywhere")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="run these sections")
    parser.add_argument("--seeds", type=int, default=None, help="seeds of the inversion and U-shaped studies (3)")
    parser.add_argument("--inversion-epochs", type=int, default=None)
    parser.add_argument("--white-box-steps", type=int, default=None)
    parser.add_argument("--fsha-runs", type=int, default=None, help="FSHA seeds (default 5)")
    parser.add_argument("--honest-runs", type=int, default=None, help="honest runs for false alarms (default 10)")
    parser.add_argument("--fsha-epochs", type=int, default=None, help="epochs of each FSHA and honest run (35)")
    parser.add_argument("--label-epochs", type=int, default=10, help="epochs of the U-shaped runs")
    parser.add_argument("--bank-seeds", type=int, default=None, help="seeds of the bank-marketing search (3)")
    parser.add_argument("--bank-epochs", type=int, default=10)
    parser.add_argument("--bank-batch-size", type=int, default=256)
    parser.add_argument("--bank-settings", nargs="+", default=list(BANK_SETTINGS))
    parser.add_argument("--img-dir", default="docs/img", help="where the two pictures go")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the models are tiny: 1 is fastest)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    base = ImageAuditSizes.quick() if args.quick else ImageAuditSizes()
    overrides = {"inversion_epochs": args.inversion_epochs, "white_box_steps": args.white_box_steps,
                 "fsha_runs": args.fsha_runs, "honest_runs": args.honest_runs, "fsha_epochs": args.fsha_epochs}
    sizes = ImageAuditSizes(**{**base.__dict__, **{k: v for k, v in overrides.items() if v is not None}})
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    if args.bank_seeds is None:
        args.bank_seeds = 1 if args.quick else 3
    if args.quick and args.bank_settings == list(BANK_SETTINGS):
        args.bank_settings = ["none", "clip_noise", "marvell:power=3"]
    result: dict[str, Any] = {"settings": {"quick": args.quick, "seeds": seeds, "sizes": sizes.__dict__,
                                           "torch": torch.__version__, "threads": args.threads}}
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    if "inversion" in args.only or "detectors" in args.only:
        report = vanilla_image_audit("digits", defenses=IMAGE_DEFENSES, seeds=list(range(seeds)), sizes=sizes,
                                     inversion="inversion" in args.only, red_team="detectors" in args.only,
                                     progress=log)
        seconds["image_studies"] = time.perf_counter() - started
        from vsplit.privacy.pictures import write_grid

        for name, (blocks, title) in report.pictures.items():
            Path(args.img_dir).mkdir(parents=True, exist_ok=True)
            log(f"wrote {write_grid(Path(args.img_dir) / name, blocks, title=title)}")
        log(report.table())
        sections = json.loads(report.to_json())
        if "inversion" in sections:
            keep = ("rows", "guesses", "settings")
            result["inversion"] = {k: sections["inversion"][k] for k in keep}
        if "detectors" in sections:
            result["detectors"] = sections["detectors"]
    if "u_shaped_labels" in args.only:
        from vsplit.privacy.u_shaped import u_shaped_audit

        began = time.perf_counter()
        report = u_shaped_audit("bank_marketing", defenses=LABEL_DEFENSES, seeds=list(range(seeds)),
                                epochs=args.label_epochs, progress=log)
        log(report.table())
        keep = ("defense", "test_auc", "test_auc_cost", "norm_leak_auc", "direction_leak_auc", "leak_auc_chance",
                "norm_leak_auc_sd", "direction_leak_auc_sd", "test_auc_sd", "n_seeds")
        result["u_shaped_labels"] = {"preset": "bank_marketing", "rows": [{k: r.get(k) for k in keep}
                                                                          for r in report.rows()],
                                     "settings": report.settings}
        seconds["u_shaped_labels"] = time.perf_counter() - began
    if "bank_marketing_label_defense" in args.only:
        began = time.perf_counter()
        result["bank_marketing_label_defense"] = bank_search(args)
        seconds["bank_marketing_label_defense"] = time.perf_counter() - began
    result["seconds"] = {k: round(v, 1) for k, v in seconds.items()}
    from vsplit.privacy.report import _finite

    print(json.dumps(_finite(result), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
