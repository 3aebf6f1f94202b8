"""The credit-risk part of a label party's report: the figures (:mod:`vsplit.report.credit`), their two plots, and
who scored which test customer when the bank-only fallback was trained.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> y = np.array([0, 1] * 30); p = np.linspace(0.0, 1.0, 60)
    >>> part = credit_section(pathlib.Path(tempfile.mkdtemp()), y=y, proba=p, draws=20)
    >>> sorted(part), sorted(part["plots"])
    (['credit', 'plots'], ['capture', 'lift'])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vsplit.report.credit import credit_summary
from vsplit.report.credit_plots import write_credit_plots


def credit_section(folder: Path, *, y: np.ndarray, proba: np.ndarray, coverage: Any = None,
                   rows: np.ndarray | None = None, seed: int = 0, draws: int = 200) -> dict[str, Any]:
    """``{"credit": ..., "plots": {...}}`` and, with ``coverage`` (the bank-only model's test scores, see
    :func:`vsplit.app.fallback.cover_test`) and the shared ``rows``, ``"coverage"`` and the gain over the bank."""
    baseline = None if coverage is None or rows is None else np.asarray(coverage.proba)[rows]
    part: dict[str, Any] = {"credit": credit_summary(y, proba, baseline=baseline, draws=draws, seed=seed),
                            "plots": write_credit_plots(folder, y=y, proba=proba, baseline=baseline)}
    if coverage is not None:
        part["coverage"] = coverage.coverage
        if getattr(coverage, "bank_model", None):  # which of the bank's own models is the baseline, and why
            part["bank_model"] = coverage.bank_model
    return part
