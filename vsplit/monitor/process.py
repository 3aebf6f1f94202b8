"""``vsplit monitor`` in one organization's process: the stability index of its own columns and its own embedding
dimensions between its training table and a new table, and (label party) of the score between two prediction jobs.

Nothing is exchanged: each party reports its own population (a partner's embedding dimensions are what the label
party's top reads of it; the partner computes and may share their stability without showing its columns). The score
needs the scores of both populations: ``vsplit predict`` on the training rows and on the new rows, then
``--scores new/predictions.csv --baseline-scores train/predictions.csv``. Outputs, in
``<output.dir>/<run_id>/<party>/monitor/<job>/``: ``stability.csv`` and ``stability.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from vsplit.atomic import write_atomic
from vsplit.config import PartyConfig, resolve
from vsplit.errors import ConfigError, DataError
from vsplit.monitor.stability import BANDS
from vsplit.monitor.views import party_stability, score_stability
from vsplit.party import LabelParty
from vsplit.runtime.jobs import default_job_id

FOLDER = "monitor"
_JOB = re.compile(r"[A-Za-z0-9._-]{1,64}")


def read_scores(path: Path) -> pd.Series:
    """The ``probability`` column of a ``predictions.csv`` (scored rows only)."""
    fix = "pass a predictions.csv written by vsplit predict"
    try:
        table = pd.read_csv(path)
    except ValueError as exc:  # pandas' ParserError and EmptyDataError, UnicodeDecodeError
        reason = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: cannot be read as CSV (UTF-8, one header line): {reason}; {fix}") from None
    if "probability" not in table.columns:
        raise DataError(f"{path}: no 'probability' column; {fix}")
    if "status" in table.columns:
        table = table[table["status"].astype(str) == "scored"]
    probability = pd.to_numeric(table["probability"], errors="coerce")
    wrong = (probability.isna() != table["probability"].isna()) | ~(probability.between(0.0, 1.0) | probability.isna())
    if wrong.any():
        row = int(wrong.to_numpy().argmax())
        raise DataError(f"{path}: column 'probability' holds {str(table['probability'].iloc[row])[:20]!r}, not a "
                        f"probability (data row {row + 1}); {fix}")
    return probability.astype(float)


def monitor_party(config: PartyConfig, input_path: Path, *, scores: Path | None = None,
                  baseline_scores: Path | None = None, job: str | None = None,
                  bins: int = 10) -> tuple[pd.DataFrame, Path]:
    """This party's stability table between its training table and ``input_path``; the table and its folder."""
    from vsplit.data.sources import read_table
    from vsplit.node import PartyNode
    from vsplit.node.aligned import AlignedNode

    job = job or default_job_id()
    if not _JOB.fullmatch(job):
        raise ConfigError(f"--job {job!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    if (scores is None) != (baseline_scores is None):
        raise ConfigError("--scores and --baseline-scores go together: the new rows' predictions.csv and the "
                          "training rows' (both from vsplit predict)")
    node = PartyNode(config, progress=False)
    if not isinstance(node, AlignedNode) or node.table is None:
        raise ConfigError(f"{config.source}: vsplit monitor compares a party's own table with new rows; it runs "
                          "for a party with data in a vertical, vanilla or U-shaped split")
    node.load_model()
    d = config.data
    training = read_table(resolve(config, d.path), id_column=d.id_column, features=node.feature_columns or None)
    new, _ = node.read_input(input_path, None)
    width = node.party.task_width if isinstance(node.party, LabelParty) else 1
    modules = node.party.modules_for(node.topology, task_width=width)
    sources = [s.name for s in node.topology.sources_of(node.name)]
    table = party_stability(node.party, modules, sources, training, new, bins=bins)
    if scores is not None and baseline_scores is not None:
        score = score_stability(read_scores(baseline_scores), read_scores(scores), party=node.name, bins=bins)
        table = pd.concat([table, score], ignore_index=True)
    folder = node.folder / FOLDER / job
    write_atomic(folder / "stability.csv", table.to_csv(index=False).encode(), within=node.folder)
    summary: dict[str, Any] = {"party": node.name, "job": job, "bands": {"monitor": BANDS[0], "shift": BANDS[1]},
                               "rows": {"training": len(training), "new": len(new)},
                               "stability": table.to_dict(orient="records")}
    if len(node.networks) > 1:  # a bag (train.networks): columns are the bag's, embedding dimensions the first's
        summary["note"] = (f"a bag of {len(node.networks)} networks: the embedding dimensions are the first "
                           "network's; the columns and the score are the whole bag's")
    write_atomic(folder / "stability.json", (json.dumps(summary, indent=2) + "\n").encode(), within=node.folder)
    return table, folder


def render(table: pd.DataFrame) -> str:
    """The table as aligned text, worst first."""
    if table.empty:
        return "(nothing to compare)"
    shown = table.sort_values("stability", ascending=False, kind="stable")
    width = max(len(str(n)) for n in shown["name"])
    lines = [f"{'name':<{width}}  {'kind':<9}  stability  band",
             *(f"{r.name:<{width}}  {r.kind:<9}  {r.stability:9.4f}  {r.band}" for r in shown.itertuples())]
    return "\n".join(lines)
