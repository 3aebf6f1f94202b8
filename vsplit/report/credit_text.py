"""The credit-risk sections of ``report.md``: base rate, Gini, intervals, score bands, thresholds, coverage.

Example:
    >>> import numpy as np
    >>> from vsplit.report.credit import credit_summary
    >>> y = np.array([0, 1] * 20); p = np.linspace(0, 1, 40)
    >>> lines = credit_lines(credit_summary(y, p, bands=4, draws=20))
    >>> lines[1]
    '## Credit-risk view (test, split model)'
"""

from __future__ import annotations

from typing import Any


def _pct(value: float | None) -> str:
    return "n/a" if value is None or value != value else f"{100 * value:.1f} %"


def _interval(pair: list[float] | None) -> str:
    return "n/a" if not pair else f"[{pair[0]:.4f}, {pair[1]:.4f}]"


def credit_lines(credit: dict[str, Any]) -> list[str]:
    """Markdown lines of ``credit`` (as :func:`vsplit.report.credit.credit_summary` returns it)."""
    boot = credit["bootstrap"]
    level = f"{100 * boot['level']:.0f} %"
    lines = ["", "## Credit-risk view (test, split model)", "",
             f"{credit['rows']:,} test customers, {credit['events']:,} events: base rate {_pct(credit['base_rate'])}.",
             "", "| figure | value |", "| --- | ---: |",
             f"| ROC AUC | {credit['auc']:.4f} |", f"| Gini (2 AUC - 1) | {credit['gini']:.4f} |",
             f"| KS | {credit['ks']:.4f} |",
             f"| AUC, bootstrap {level} interval | {_interval(boot['auc'])} |"]
    if "gain" in boot:
        lines.append(f"| AUC gain over the bank alone | {boot['gain_point']:+.4f} |")
        lines.append(f"| gain, bootstrap {level} interval | {_interval(boot['gain'])} |")
    lines += ["", f"Intervals: {boot['draws']} bootstrap resamples of the test rows (seed {boot['seed']}), the gain "
              "paired on the same resample.",
              "", "### Score bands (band 1 = highest scores)", "",
              "| band | customers | events | event rate | lift | cumulative capture | scores |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for b in credit["bands"]:
        lines.append(f"| {b['band']} | {b['count']:,} | {b['events']:,} | {_pct(b['event_rate'])} | {b['lift']:.2f} | "
                     f"{_pct(b['cum_capture'])} | {b['min_score']:.4f}-{b['max_score']:.4f} |")
    total = sum(b["count"] for b in credit["bands"]), sum(b["events"] for b in credit["bands"])
    lines.append(f"| all | {total[0]:,} | {total[1]:,} | {_pct(credit['base_rate'])} | 1.00 | 100.0 % | |")
    lines += ["", "### Thresholds (decline the highest scores)", "",
              "| declined | score threshold | approval rate | bad rate among approved | precision | recall |",
              "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in credit["thresholds"]:
        lines.append(f"| {_pct(t['decline_share'])} | {t['threshold']:.4f} | {_pct(t['approval_rate'])} | "
                     f"{_pct(t['bad_rate'])} | {_pct(t['precision'])} | {_pct(t['recall'])} |")
    return lines


def coverage_lines(coverage: dict[str, Any]) -> list[str]:
    """Markdown lines of who scored which test customers: the split on the shared ones, the bank's own model on
    the ones a partner does not know, and both together on every test customer."""
    names = {"all": "every test customer", "shared": "shared with every partner (split)",
             "bank_only": "unknown to a partner (bank's own model)"}
    lines = ["", "## Every test customer scored", "",
             "| customers | rows | ROC AUC | KS | log loss |", "| --- | ---: | ---: | ---: | ---: |"]
    for key, label in names.items():
        m = coverage.get(key)
        if m:
            lines.append(f"| {label} | {m['n_scored']:,} | {_fmt(m.get('auc'))} | {_fmt(m.get('ks'))} | "
                         f"{_fmt(m.get('log_loss'))} |")
    return lines


def history_lines(history: list[dict[str, Any]], best_epoch: int | None, monitor: str | None) -> list[str]:
    """The validation history (epochs numbered from 1) and the chosen epoch, as Markdown lines."""
    chosen = f"Chosen epoch: {best_epoch + 1} (of {len(history)} run)" if best_epoch is not None else "No epoch chosen"
    watched = f", by {monitor}" if monitor else ""
    lines = ["", f"{chosen}{watched}; its weights are the model's. Epochs are numbered from 1.", "",
             "| epoch | train loss | validation loss | validation AUC |", "| ---: | ---: | ---: | ---: |"]
    for h in history:
        lines.append(f"| {h['epoch'] + 1} | {_fmt(h.get('train_loss'))} | {_fmt(h.get('val_loss'))} | "
                     f"{_fmt(h.get('val_auc'))} |")
    return lines


def _fmt(value: Any) -> str:
    return "n/a" if value is None or value != value else f"{value:.4f}"


def bank_model_lines(bank_model: dict[str, Any]) -> list[str]:
    """Markdown lines naming the bank-alone baseline: which of the bank's own models it is, and why (each candidate's
    validation AUC; :meth:`vsplit.app.fallback.BankOnly.describe`), with its warning if near chance.

    >>> bank_model_lines({"model": "logistic_regression", "val_auc": {"network": 0.6}})[3][:68]
    'The bank-alone baseline, and the fallback for customers a partner do'
    """
    aucs = ", ".join(f"{k.replace('_', ' ')} {v:.4f}" for k, v in bank_model.get("val_auc", {}).items())
    by = bank_model.get("chosen_by", "validation rows")
    where = f"in {by} of its rows" if by != "validation rows" else "on its validation rows"
    lines = ["", "### The bank alone", "",
             f"The bank-alone baseline, and the fallback for customers a partner does not know, is the bank's "
             f"{bank_model['model'].replace('_', ' ')} on its own columns: the better of its own models {where} "
             f"({'AUC: ' + aucs if aucs else 'no validation rows'})."]
    if bank_model.get("warning"):
        lines += ["", f"> **Warning.** {bank_model['warning']}"]
    return lines
