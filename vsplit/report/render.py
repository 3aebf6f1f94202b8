"""Re-render a label party's report from its merged report: Markdown, and the plots that need only the JSON.

``vsplit report`` and the pilot use this after adding what the label party could not know on its own (the
centralized baseline, the partner's own traffic; :mod:`vsplit.report.merge`). The label party's own ``report.json``
is never rewritten: the merged one is ``report-merged.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vsplit.report.merge import MERGED
from vsplit.report.plots import plot_auc_comparison
from vsplit.report.writer import write_label_report


def render_report(folder: Path, report: dict[str, Any]) -> Path:
    """Write ``report-merged.json`` and rewrite ``report.md`` and ``auc_comparison.png`` in ``folder``."""
    aucs = {"split": report["metrics"]["auc"], **{k: v["auc"] for k, v in report["baselines"].items()}}
    plot_auc_comparison(folder / report["plots"].get("auc_comparison", "auc_comparison.png"), aucs)
    return write_label_report(folder, {k: v for k, v in report.items() if k != "schema"}, json_name=MERGED)
