"""A finished run as the console shows it, read from the party's own run folder (``vsplit console --runs DIR``).

Each party folder (``<runs>/<run_id>/<party>/`` holding ``result.json`` of a training run or ``woe.json`` of
``vsplit bin``) is one view: the files the party's run wrote and nothing else: ``result.json`` (PSI, history, chosen
epoch, traffic; a boosting run's trees and held-out log loss per tree, a scorecard's steps), ``woe.json`` (a binning
run's PSI, traffic and IV), ``peers.json`` (the peers' certificate fingerprints), ``report.json`` (the test metrics
and the value section), its checkpoints, and the reports, model card and pictures it may show (:data:`SHOWN`): the
report, the model card (a scorecard's ``scorecard.md``), the value report of ``vsplit bin`` and ``iv.png``.

Example:
    >>> import json, tempfile
    >>> root = Path(tempfile.mkdtemp()); party = root / "r1" / "bank"; party.mkdir(parents=True)
    >>> _ = (party / "result.json").write_text(json.dumps({"party": "bank", "role": "label", "best_epoch": 0,
    ...     "history": [{"epoch": 0, "train_loss": 0.5, "val_auc": 0.7}], "psi": {"intersection": 90}}))
    >>> views = find_runs(root); list(views)
    ['r1/bank']
    >>> snap = finished_snapshot(views["r1/bank"]); snap["status"], snap["training"]["chosen_epoch"]
    ('done', 0)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from vsplit.console.state import checkpoints

#: the files of a party folder the console may serve: its report, model card and pictures, by name
SHOWN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.(png|html|md)")
#: a party folder holds one of these once a run ended: a training run's result, a binning run's (``vsplit bin``)
RUN_FILES = ("result.json", "woe.json")
#: JSON files above this size are not read (a run's own files are far smaller)
MAX_JSON = 8 << 20


def find_runs(root: Path, *, limit: int = 500) -> dict[str, Path]:
    """The party folders under ``root`` (a runs folder, one run's folder or one party's), ``run/party -> folder``."""
    root = root.resolve()
    if any((root / name).is_file() for name in RUN_FILES):
        found = [root]
    else:
        found = sorted({p.parent for name in RUN_FILES for p in [*root.glob(f"*/{name}"), *root.glob(f"*/*/{name}")]})
    return {f"{p.parent.name}/{p.name}": p for p in found[:limit]}


def read_json(path: Path) -> dict[str, Any]:
    """``path`` as a JSON object, or ``{}`` if it is missing, too large or not a JSON object."""
    try:
        if path.stat().st_size > MAX_JSON:
            return {}
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def outputs(folder: Path | None) -> dict[str, Any]:
    """What a party folder shows at the end: its report and model card (if written), its pictures, its test metrics
    and value section (``report.json``'s ``metrics`` and ``credit``)."""
    if folder is None or not folder.is_dir():
        return {}
    names = sorted(p.name for p in folder.iterdir() if SHOWN.fullmatch(p.name) and p.is_file())
    report = read_json(folder / "report.json")

    def first(*candidates: str) -> str | None:
        return next((n for n in candidates if n in names), None)

    return {"report": first("report.html", "report.md"),
            "model_card": first("model_card.html", "model_card.md", "scorecard.md"),
            "value_report": first("value_report.html", "value_report.md"),
            "documents": [n for n in names if not n.endswith(".png")],
            "pictures": [n for n in names if n.endswith(".png")],
            "metrics": report.get("metrics"), "value": report.get("credit"), "warnings": report.get("warnings", [])}


def finished_snapshot(folder: Path) -> dict[str, Any]:
    """The console's view of the finished run in party folder ``folder`` (the same keys as a live snapshot)."""
    result = read_json(folder / "result.json")
    binning = read_json(folder / "woe.json")
    if not result and binning:  # a `vsplit bin` run: its summary has the same PSI and traffic
        result = {"party": binning.get("party"), "role": binning.get("role"), "psi": binning.get("psi"),
                  "comm": binning.get("communication"), "seconds": binning.get("seconds")}
    report = read_json(folder / "report.json")
    pins = read_json(folder / "peers.json").get("peers") or {}
    history = [h for h in result.get("history") or [] if isinstance(h, dict)]
    comm = result.get("comm") or {}
    rows = [{"peer": "all peers", "direction": d, "type": kind, "frames": v.get("frames", 0),
             "bytes": v.get("bytes", 0)}
            for d in ("sent", "received") for kind, v in sorted((comm.get(d) or {}).items()) if isinstance(v, dict)]
    rows += [{"peer": peer, "direction": d, "type": "all types", "frames": None, "bytes": n}
             for peer, totals in sorted((comm.get("by_peer") or {}).items()) if isinstance(totals, dict)
             for d, n in sorted(totals.items())]
    return {
        "party": result.get("party") or folder.name, "role": result.get("role") or report.get("role", ""),
        "topology": report.get("topology", ""), "run_id": folder.parent.name, "mode": "finished",
        "status": "done", "error": "", "stage": "finished",
        "peers": [{"name": p, "fingerprint": fp, "state": "closed", "history": []} for p, fp in sorted(pins.items())],
        "psi": result.get("psi") or {},
        "training": {"epoch": None, "epochs": len(history) or None, "step": None,
                     "loss": [[h["epoch"] + 1, h["train_loss"]] for h in history if "train_loss" in h],
                     "loss_x": "epoch",
                     "history": history, "chosen_epoch": result.get("best_epoch")} | model_progress(result),
        "traffic": rows, "detectors": [], "checkpoints": checkpoints(folder), "finished": {"seconds":
                                                                                          result.get("seconds")},
    }


def model_progress(result: dict[str, Any]) -> dict[str, Any]:
    """A boosting run's trees (and its held-out log loss per tree, where rows were held out) or a scorecard's steps,
    from its ``result.json``, as a live console shows them.

    >>> model_progress({"trees": 2, "kept_trees": 1, "validation_losses": [0.6, 0.61]})["loss"]
    [[1, 0.6], [2, 0.61]]
    >>> model_progress({"iterations": 30, "attributes": ["age"]})
    {'unit': 'steps', 'done': 30, 'total': 30}
    >>> model_progress({"history": []})
    {}
    """
    if isinstance(result.get("trees"), int):
        losses = [v for v in result.get("validation_losses") or [] if isinstance(v, (int, float))]
        view: dict[str, Any] = {"unit": "trees", "done": result["trees"], "total": result["trees"],
                                "kept": result.get("kept_trees")}
        if losses:
            view.update(loss=[[k, v] for k, v in enumerate(losses, start=1)], loss_x="trees",
                        loss_name="held-out log loss")
        return view
    if isinstance(result.get("iterations"), int) and "attributes" in result:
        return {"unit": "steps", "done": result["iterations"], "total": result["iterations"]}
    return {}
