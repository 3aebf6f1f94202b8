"""Write a run's reports: the label party's full one and a feature party's own.

``report.json`` is machine-readable (it validates against ``schema.json`` next to this module); ``report.md`` is the
human version with the plots, for managers and risk officers. Both are written atomically.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> path = write_partner_report(folder, {"run_id": "r", "party": "partner", "communication": {
    ...     "sent": {"Activations": {"frames": 3, "bytes": 300}}, "received": {}}, "seconds": {"train": 1.0}})
    >>> "Activations" in path.read_text()
    True
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from vsplit import strict_json
from vsplit.atomic import write_atomic
from vsplit.report.credit_text import bank_model_lines, coverage_lines, credit_lines, history_lines
from vsplit.report.html import write_html_report

SCHEMA = "vsplit-report-1"
METRICS = ("auc", "ks", "accuracy", "f1", "log_loss")


def schema() -> dict[str, Any]:
    """The JSON schema of the label party's ``report.json``."""
    return json.loads(resources.files("vsplit.report").joinpath("schema.json").read_text())


def _json(path: Path, payload: dict[str, Any]) -> None:
    write_atomic(path, (strict_json.dumps(payload, indent=2, sort_keys=False) + "\n").encode())


def _number(value: Any) -> str:
    """``value`` with 4 decimals, or ``n/a`` when it is missing or undefined (null, NaN).

    >>> _number(0.12345), _number(None), _number(float("nan"))
    ('0.1235', 'n/a', 'n/a')
    """
    return "n/a" if value is None or value != value else f"{value:.4f}"


def _columns_table(columns: dict[str, dict[str, Any]] | None) -> list[str]:
    """The column types of this party's own columns (the rule that set each), as Markdown lines."""
    if not columns:
        return []
    lines = ["", "## Columns (this party's own)", "", "| column | type | rule | categories |",
             "| --- | --- | --- | ---: |"]
    for name, c in columns.items():
        lines.append(f"| {name} | {c['type']} | {c['rule']} | {c.get('categories', '')} |")
    return lines


def _traffic_table(direction: str, traffic: dict[str, dict[str, int]]) -> list[str]:
    lines = [f"| {direction} | frames | bytes |", "| --- | ---: | ---: |"]
    for kind, t in sorted(traffic.items()):
        lines.append(f"| {kind} | {t['frames']:,} | {t['bytes']:,} |")
    return lines


def trees_lines(model: dict[str, Any]) -> list[str]:
    """The boosted trees of a boosting run's report, as Markdown lines.

    >>> trees_lines({"kind": "boosting", "trees": 5, "kept_trees": 4, "max_depth": 3, "learning_rate": 0.3})[3]
    '5 trees trained, 4 kept, depth up to 3, learning rate 0.3.'
    """
    kept = model.get("kept_trees")
    lines = ["", "## Model (boosted trees)", "",
             f"{model['trees']} trees trained{f', {kept} kept' if kept is not None else ''}, depth up to "
             f"{model['max_depth']}, learning rate {model['learning_rate']}.", "",
             "No bank-alone comparison: the trees are grown on every party's columns and have no bank-only model."]
    losses = model.get("validation_losses") or []
    if losses:
        lines += ["", "| trees | held-out log loss |", "| ---: | ---: |"]
        lines += [f"| {k} | {_number(v)} |" for k, v in enumerate(losses, start=1)]
    return lines


def ensemble_lines(model: dict[str, Any], *, alone: bool = False) -> list[str]:
    """The model section of an ensemble run's report, as Markdown lines: what is combined, with which weight, and
    each part's own test metrics beside the combination's (``alone``: the report has a bank-alone baseline).

    >>> ensemble_lines({"kind": "ensemble", "networks": 5, "second": "trees", "weight": 0.75, "trees": 120,
    ...                 "refit": True, "weight_scores": [], "validation_auc": {}})[3]
    'A bag of 5 split networks and 120 boosted trees, combined on the log-odds scale: 0.75 x networks + 0.25 x trees.'
    """
    w = model.get("weight")
    second = "boosted trees" if model.get("second", "trees") == "trees" else "a scorecard"
    what = f"{model['trees']} boosted trees" if model.get("second", "trees") == "trees" else "a scorecard"
    lines = ["", "## Model (ensemble)", ""]
    if w is None:
        lines.append(f"A bag of {model['networks']} split networks and {what}.")
    else:
        lines.append(f"A bag of {model['networks']} split networks and {what}, combined on the log-odds scale: "
                     f"{w:g} x networks + {round(1 - w, 6):g} x {model.get('second', 'trees')}.")
    scores = model.get("weight_scores") or []
    if scores:
        best = max(scores, key=lambda ws: ws[1])
        then = ", then both parts refitted on every row." if model.get("refit") else "."
        how = ("the weight nearest 0.5 within one standard error of the best AUC"
               if model.get("weight_rule") == "one_se" else "the best AUC")
        lines += ["", f"The weight was chosen on rows set aside from training ({len(scores)} candidates; best AUC "
                      f"there {_number(best[1])}; rule: {how}){then}"]
    parts = model.get("parts") or {}
    if parts:
        lines += ["", "| part alone | " + " | ".join(METRICS) + " |", "| --- | " + " | ".join("---:" for _ in METRICS)
                  + " |"]
        lines += [f"| {name} | " + " | ".join(f"{v[k]:.4f}" for k in METRICS) + " |" for name, v in parts.items()]
    if not alone:
        lines += ["", f"No bank-alone comparison: the networks and the {second} use every party's columns, and this "
                      "run has no bank-only model (customers a partner does not know get no score)."]
    return lines


def write_label_report(folder: Path, report: dict[str, Any], *, json_name: str = "report.json") -> Path:
    """Write ``report.json`` (or ``json_name``: the merged report) and ``report.md`` for the label party; return the
    Markdown path."""
    report = {"schema": SCHEMA, **report}
    _json(folder / json_name, report)
    m = report["metrics"]
    ensemble = report.get("model", {}).get("kind") == "ensemble"
    rows = [("split ensemble (all parties)" if ensemble else "split (all parties)", m)]
    rows += [(name.replace("_", " "), b) for name, b in report["baselines"].items()]
    lines = [
        f"# vsplit run `{report['run_id']}`: report of {report['party']} (label party)",
        "",
        f"Created {report['created']}. Test metrics on the {m.get('n_scored', '?')} test customers every party knows.",
        "",
        "| model | " + " | ".join(METRICS) + " |",
        "| --- | " + " | ".join("---:" for _ in METRICS) + " |",
    ]
    lines += [f"| {name} | " + " | ".join(f"{v[k]:.4f}" for k in METRICS) + " |" for name, v in rows]
    psi = report["psi"].get("train")
    lines += ["", "## Record alignment (PSI)", ""]
    if psi is None:
        lines.append(f"None: in this {report.get('topology', '')} split one party holds every row.")
    else:
        lines.append(f"Training: {psi['size']:,} customers here, peers {psi.get('peer_sizes', {})}, "
                     f"{psi['intersection']:,} shared.")
    if "test" in report["psi"]:
        t = report["psi"]["test"]
        lines.append(f"Test: {t['size']:,} customers here, {t['intersection']:,} shared with every partner.")
    lines += credit_lines(report["credit"]) if report.get("credit") else []
    lines += bank_model_lines(report["bank_model"]) if report.get("bank_model") else []
    lines += coverage_lines(report["coverage"]) if report.get("coverage") else []
    if report.get("model", {}).get("kind") == "boosting":  # trees: no epochs, no bank-only model
        lines += trees_lines(report["model"])
    else:
        if report.get("model", {}).get("kind") == "ensemble":  # then the networks' history
            lines += ensemble_lines(report["model"], alone=bool(report["baselines"] or report.get("coverage")))
        lines += ["", "## Training (validation history)", ""]
        lines += [f"> **Warning.** {text}" for text in report.get("warnings", [])]
        lines += history_lines(report["history"], report.get("best_epoch"), report.get("monitor"))
    lines += _columns_table(report.get("columns"))
    lines += ["", "## What crossed the wire", ""]
    for party, comm in report["communication"].items():
        lines += [f"### {party}", ""]
        lines += [*_traffic_table("sent", comm["sent"]), "", *_traffic_table("received", comm["received"]), ""]
    lines += ["## Time", "", "| phase | seconds |", "| --- | ---: |"]
    lines += [f"| {k} | {v:.2f} |" for k, v in report["seconds"].items()]
    lines += ["", "## Plots", ""]
    lines += [f"![{name}]({file})" for name, file in report["plots"].items()]
    hashes = ", ".join(f"{p} `{h[:12]}`" for p, h in report["config_hashes"].items())
    lines += ["", f"Config hashes (SHA-256): {hashes}"]
    path = folder / "report.md"
    write_atomic(path, ("\n".join(lines) + "\n").encode())
    write_html_report(path)
    return path


def write_partner_report(folder: Path, report: dict[str, Any]) -> Path:
    """Write a feature party's own ``report.json`` and ``report.md``: what it sent and received."""
    report = {"schema": SCHEMA + "-partner", **report}
    _json(folder / "report.json", report)
    comm = report["communication"]
    what = {
        "compute": "This party holds no data: it received activations of the client's head and the gradients of its "
                   "own output, and sent its middle segment's activations and the gradients of what it received.",
        "label": "This party kept its rows, labels and predictions; only activations and gradients crossed.",
    }.get(report.get("role", ""), "This party sent only activations of its own rows (and PSI's blinded points); it "
                                  "received only their gradients, the training plan and end-of-epoch signals.")
    lines = [f"# vsplit run `{report['run_id']}`: report of {report['party']}", "", what, ""]
    if report.get("metrics"):
        lines += ["| test metric | value |", "| --- | ---: |"]
        lines += [f"| {k} | {v:.4f} |" for k, v in report["metrics"].items() if isinstance(v, float)] + [""]
    if report.get("history"):  # a label party without a test set: its validation history is its quality figure
        lines += ["## Training (validation history)", "", "No test set was configured (data.test_path): the validation "
                  "rows, held out of training, are the only quality figure.",
                  *history_lines(report["history"], report.get("best_epoch"), report.get("monitor")), ""]
    lines += [*_traffic_table("sent", comm["sent"]), "", *_traffic_table("received", comm["received"]), ""]
    lines += [*_columns_table(report.get("columns"))[1:], ""] if report.get("columns") else []
    lines += ["| phase | seconds |", "| --- | ---: |"] + [f"| {k} | {v:.2f} |" for k, v in report["seconds"].items()]
    path = folder / "report.md"
    write_atomic(path, ("\n".join(lines) + "\n").encode())
    write_html_report(path)
    return path
