"""An audit's results: one row per defense setting (means over seeds), as a table, JSON and a privacy-utility plot.

Example:
    >>> runs = [
    ...     {"defense": "none", "seed": 0, "test_auc": 0.90, "direction_leak_auc": 1.0, "reconstruction_r2": 0.8},
    ...     {"defense": "nopeek", "seed": 0, "test_auc": 0.89, "direction_leak_auc": 1.0, "reconstruction_r2": 0.2},
    ... ]
    >>> report = AuditReport(source="demo", runs=runs, settings={}, defenses=["none", "nopeek"])
    >>> row = report.rows()[1]
    >>> row["defense"], round(row["test_auc_cost"], 3), row["reconstruction_r2"]
    ('nopeek', 0.01, 0.2)
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.errors import ConfigError
from vsplit.strict_json import finite_or_none

#: The columns of the summary table, in order: (key, heading, format).
TABLE = [
    ("test_auc", "test AUC", "{:.4f}"),
    ("test_auc_cost", "AUC cost (pts)", "{:+.2f}"),
    ("norm_leak_auc", "norm leak AUC", "{:.3f}"),
    ("direction_leak_auc", "direction leak AUC", "{:.3f}"),
    ("model_completion_excess_auc", "completion excess AUC", "{:+.3f}"),
    ("reconstruction_r2", "reconstruction R² (train)", "{:.3f}"),
    ("reconstruction_r2_max", "max column R² (train)", "{:.3f}"),
    ("reconstruction_r2_scoring", "reconstruction R² (scoring)", "{:.3f}"),
    ("epsilon", "ε", "{:.3g}"),
]


def _mean(values: list[Any]) -> float:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    finite = [v for v in numbers if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


@dataclass
class AuditReport:
    """Every run of an audit (``runs``: one dict per defense setting and seed) and how it was made."""

    source: str
    runs: list[dict[str, Any]]
    settings: dict[str, Any]
    defenses: list[str]

    def rows(self) -> list[dict[str, Any]]:
        """One row per defense setting: the mean over seeds of every measurement, its seeds' standard deviation for
        the headline ones (``*_sd``), and ``test_auc_cost``: the mean test AUC lost against ``"none"`` on the same
        seeds, in AUC units (NaN when ``"none"`` was not run)."""
        baseline = {r["seed"]: r["test_auc"] for r in self.runs if r["defense"] == "none"}
        rows = []
        for defense in self.defenses:
            runs = [r for r in self.runs if r["defense"] == defense]
            keys = [k for k in runs[0] if k not in ("defense", "seed")]
            row: dict[str, Any] = {"defense": defense, "source": self.source, "n_seeds": len(runs)}
            for key in keys:
                row[key] = _mean([r.get(key) for r in runs])
            for key in ("test_auc", "norm_leak_auc", "direction_leak_auc", "reconstruction_r2"):
                values = [r[key] for r in runs if key in r]
                row[f"{key}_sd"] = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
            costs = [baseline[r["seed"]] - r["test_auc"] for r in runs if r["seed"] in baseline]
            row["test_auc_cost"] = float(np.mean(costs)) if costs else math.nan
            rows.append(row)
        return rows

    def to_json(self) -> str:
        """The rows as one JSON list (NaN and infinities as null)."""
        return json.dumps([_finite(row) for row in self.rows()], indent=2)

    def table(self) -> str:
        """The rows as a Markdown table (AUC cost in points, i.e. AUC × 100)."""
        head = ["defense", *(heading for _, heading, _ in TABLE)]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in self.rows():
            cells = [row["defense"]]
            for key, _, fmt in TABLE:
                value = row.get(key, math.nan)
                if key == "test_auc_cost":
                    value = value * 100
                missing = value is None or (isinstance(value, float) and math.isnan(value))
                cells.append("–" if missing else fmt.format(value))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike) -> Path:
        """Write the privacy-utility plot (PNG): test AUC against each leakage measure, one point per setting."""
        try:
            import matplotlib
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError("the plot needs matplotlib; install it with: pip install 'vsplit[privacy]'") from exc

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

        rows = self.rows()
        panels = [
            ("norm_leak_auc", "norm leak AUC (feature party)"),
            ("direction_leak_auc", "direction leak AUC (feature party)"),
            ("model_completion_excess_auc", "model completion excess AUC"),
            ("reconstruction_r2", "reconstruction R² (label party)"),
        ]
        fig, axes = plt.subplots(2, 2, figsize=(10, 8), constrained_layout=True)
        for ax, (key, title) in zip(axes.flat, panels, strict=True):
            for row in rows:
                x, y = row.get(key, math.nan), row.get("test_auc", math.nan)
                if math.isnan(x) or math.isnan(y):
                    continue
                ax.scatter([x], [y], s=30)
                ax.annotate(row["defense"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
            ax.set_xlabel(title + "\n(lower: more private)")
            ax.set_ylabel("test AUC")
            ax.grid(alpha=0.3)
        fig.suptitle(f"privacy-utility: {self.source}, mean over {len(self.settings.get('seeds', [])) or '?'} seeds")
        return _atomic_write(Path(path), lambda f: fig.savefig(f, format="png", dpi=120), close=lambda: plt.close(fig))

    def write(self, directory: str | os.PathLike) -> dict[str, Path]:
        """Write ``report.md``, ``report.json`` (rows, runs, settings) and ``privacy_utility.png`` to ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        document = {"rows": self.rows(), "runs": self.runs, "settings": self.settings}
        text = json.dumps(_finite(document), indent=2)
        markdown = f"# Privacy audit: {self.source}\n\n{self.table()}\n"
        return {
            "markdown": _atomic_write(out / "report.md", lambda f: f.write(markdown.encode())),
            "json": _atomic_write(out / "report.json", lambda f: f.write(text.encode())),
            "plot": self.plot(out / "privacy_utility.png"),
        }


_finite = finite_or_none  # non-finite numbers as null: strict JSON


def _atomic_write(path: Path, write, close=None) -> Path:
    """Write through a temporary file in the same folder, then ``os.replace``: readers never see half a file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            write(f)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    finally:
        if close is not None:
            close()
    return path
