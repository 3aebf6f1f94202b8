"""The short human summary a command prints at its end: what was done, the metrics where there are some, and where
the report is. ``--json`` prints :func:`train_record` instead, one JSON object (epochs numbered from 1).

Example:
    >>> from types import SimpleNamespace
    >>> result = SimpleNamespace(party="bank", role="label", psi={"train": {"intersection": 90}}, history=[{}, {}],
    ...                          best_epoch=1, seconds={"train": 2.0}, comm={}, test={"auc": 0.8, "n_scored": 50},
    ...                          baselines={"label_party_only": {"auc": 0.7}})
    >>> print(train_summary(result, report=None))
    bank: PSI 90 shared customers; 2 epochs run, epoch 2 chosen; 2 s
      test AUC 0.8000 (Gini 0.6000) on 50 shared customers; bank alone 0.7000
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def train_record(result: Any, *, report: Path | None) -> dict[str, Any]:
    """``vsplit train --json``: one object; ``chosen_epoch`` counts from 1 like the report."""
    if hasattr(result, "schedule"):  # a horizontal split's rounds
        return {"party": result.party, "schedule": result.schedule, "seconds": result.seconds,
                "round_seconds": result.round_seconds, "lost": result.lost, "bytes_sent": result.comm.get("by_peer")}
    test = result.test or {}
    return {"party": result.party, "psi_intersection": (result.psi.get("train") or {}).get("intersection"),
            "epochs_run": len(result.history) or None,
            "chosen_epoch": None if result.best_epoch is None else result.best_epoch + 1,
            "test_auc": test.get("auc"), "test_rows": test.get("n_scored"),
            "bank_alone_auc": (result.baselines.get("label_party_only") or {}).get("auc"),
            "seconds": result.seconds, "bytes_sent": result.comm.get("by_peer"),
            "report": None if report is None else str(report),
            **({"networks": result.networks} if getattr(result, "networks", None) else {})}


def train_summary(result: Any, *, report: Path | None) -> str:
    """Two or three lines for a person: PSI, epochs, test AUC and Gini beside the bank alone, the report's path."""
    if hasattr(result, "schedule"):  # a horizontal split's rounds
        lost = f"; lost {', '.join(result.lost)}" if result.lost else ""
        return f"{result.party}: {result.schedule} done in {sum(result.seconds.values()):.0f} s{lost}"
    psi = (result.psi.get("train") or {}).get("intersection")
    head = [f"{result.party}:"]
    head.append(f"PSI {psi:,} shared customers;" if psi is not None else "no PSI (one party holds every row);")
    networks = getattr(result, "networks", None) or []
    if networks:  # a bag (train.networks): each network's epochs
        runs = ", ".join(f"{n['epochs_run']}" for n in networks)
        head.append(f"a bag of {len(networks)} networks, epochs run {runs};")
    elif result.history:
        chosen = "" if result.best_epoch is None else f", epoch {result.best_epoch + 1} chosen"
        head.append(f"{len(result.history)} epochs run{chosen};")
    if getattr(result, "weight", None) is not None:  # an ensemble ([model] kind = "ensemble")
        head.append(f"the networks weigh {result.weight:g}, the trees {1 - result.weight:g};")
    head.append(f"{sum(result.seconds.values()):.0f} s")
    lines = [" ".join(head)]
    test = result.test or {}
    if test.get("auc") is not None:
        alone = (result.baselines.get("label_party_only") or {}).get("auc")
        line = (f"  test AUC {test['auc']:.4f} (Gini {2 * test['auc'] - 1:.4f}) on {test.get('n_scored', 0):,} "
                "shared customers")
        model = (result.baselines.get("label_party_only") or {}).get("model")
        named = f" ({model.replace('_', ' ')})" if model else ""
        lines.append(line + (f"; bank alone{named} {alone:.4f}" if alone is not None else ""))
        if warning := (result.baselines.get("label_party_only") or {}).get("warning"):
            lines.append(f"  warning: {warning}")
    elif result.history and result.role == "label":
        lines.append("  no test set (data.test_path): the report shows the validation history")
    if report is not None:
        lines.append(f"  report: {report}")
    return "\n".join(lines)


#: pilots whose data holds a column that leaks the label
LEAKY = {"bank-marketing": "duration (the call's length, known only after the call)"}


def leak_note(pilot: str) -> list[str]:
    """A warning line for a pilot on a leaky preset, else nothing.

    >>> leak_note("bank-marketing-no-duration")
    []
    """
    if pilot not in LEAKY:
        return []
    return [f"  note: {pilot} includes {LEAKY[pilot]}, which leaks the label: a benchmark setting, not a realistic "
            "one; `vsplit pilot bank-marketing-no-duration` leaves it out"]


def coverage_summary(report: dict[str, Any]) -> list[str]:
    """Lines on who scored the test customers: the split on the shared ones, the bank's own model on the others.

    >>> coverage_summary({"coverage": {"all": {"auc": 0.7, "n_scored": 10}, "bank_only": {"auc": 0.6, "n_scored": 2}}})
    ['  every test customer (10): AUC 0.7000; the 2 unknown to a partner, scored by the bank alone: AUC 0.6000']
    """
    cov = report.get("coverage") or {}
    if "all" not in cov:
        return []
    line = f"  every test customer ({cov['all']['n_scored']:,}): AUC {cov['all']['auc']:.4f}"
    if "bank_only" in cov:
        line += (f"; the {cov['bank_only']['n_scored']:,} unknown to a partner, scored by the bank alone: "
                 f"AUC {cov['bank_only']['auc']:.4f}")
    bank = report.get("bank_model") or {}
    more = [f"  bank alone: its {bank['model'].replace('_', ' ')} (the better of its own models on its validation "
            "rows)"] if bank.get("model") else []
    return [line, *more, *([f"  warning: {bank['warning']}"] if bank.get("warning") else [])]


def predict_summary(path: Path) -> str:
    """What a prediction job wrote: how many customers each model scored, from its ``predict.json``."""
    import json

    done = json.loads((path.parent / "predict.json").read_text(encoding="utf-8"))
    models = done.get("models")
    if not models:
        return f"{done['party']}: job {done['job']} done; wrote {path}"
    counts = ", ".join(f"{n:,} by {'no model (unknown to this party)' if m == 'none' else m}"
                       for m, n in models.items())
    return f"{done['party']}: job {done['job']} scored {counts}; wrote {path}"
