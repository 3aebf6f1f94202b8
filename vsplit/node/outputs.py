"""What a party's process writes, the same for every topology: JSON records, and a scoring job's predictions.

``predictions.csv`` has the ID column, ``probability`` (a binary task, a regression's ``prediction`` is named so too)
or ``probability_<k>`` per class, ``model``: which model scored the row (``split``, ``bank_only`` for a customer a
partner does not know, scored by the label party's own model, or empty), ``status``: ``scored``, or why the split
has no score (``unknown to <party>``, ``unknown to a partner``), and ``unseen_categories``: the label party's columns
whose value in that row training never saw (scored as the unknown category; ``;``-separated, empty if none).
Files are written atomically.

Example:
    >>> import tempfile, pathlib, pandas as pd
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> path, counts, models = write_predictions(folder, id_column="id", own=["a", "b"], wanted=["a", "b", "z"],
    ...                                          by_id={"a": 0.25}, fallback={"b": 0.5}, missing="unknown to a partner",
    ...                                          me="bank")
    >>> pd.read_csv(path)["status"].tolist()
    ['scored', 'unknown to a partner', 'unknown to bank']
    >>> pd.read_csv(path)["model"].fillna("").tolist(), models
    (['split', 'bank_only', ''], {'split': 1, 'bank_only': 1, 'none': 1})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vsplit import strict_json
from vsplit.atomic import write_atomic


@dataclass
class Scores:
    """What a party's scoring gave: its table's IDs and, where it scores, each known customer's prediction."""

    ids: list[str] = field(default_factory=list)
    #: ID -> prediction (a float, or one per class) for the customers scored; ``None``: this party scores nothing
    by_id: dict[str, Any] | None = None
    #: ID -> the label party's own model's prediction, for customers of its table the split did not score
    fallback: dict[str, Any] = field(default_factory=dict)
    #: the status of a customer of this party's table that got no score
    missing: str = "unknown to a partner"
    seconds: dict[str, float] = field(default_factory=dict)
    communication: dict[str, Any] = field(default_factory=dict)
    #: the program's own lines of predict.json (e.g. the PSI summary, the schedule, rows served per peer)
    summary: dict[str, Any] = field(default_factory=dict)
    #: ID -> the label party's columns holding a category training never saw (:mod:`vsplit.data.unseen`)
    unseen: dict[str, list[str]] = field(default_factory=dict)


def write_predictions(folder: Path, *, id_column: str, own: Sequence[str], wanted: Sequence[str] | None,
                      by_id: Mapping[str, Any], missing: str, me: str, fallback: Mapping[str, Any] | None = None,
                      within: Path | None = None, unseen: Mapping[str, Sequence[str]] | None = None
                      ) -> tuple[Path, dict[str, int], dict[str, int]]:
    """``predictions.csv`` in ``folder`` for the IDs ``wanted`` (default: ``own``, this party's table), scored by the
    split (``by_id``) or else by the label party's own model (``fallback``); the path, the count of each status and
    of each model. ``within``: the party's run folder, no folder below which may be a link. ``unseen``: ID -> the
    columns of the row holding a category training never saw (the ``unseen_categories`` column, ``;``-separated)."""
    import numpy as np
    import pandas as pd

    known = set(own)
    wanted = list(wanted) if wanted is not None else list(own)
    fallback = fallback or {}
    scores = [by_id[i] if i in by_id else fallback.get(i) for i in wanted]  # an ID asked for twice: two rows
    columns: dict[str, Any] = {id_column: wanted}
    if any(np.ndim(v) == 1 for v in by_id.values()):  # one probability per class
        for k in range(max(np.size(v) for v in by_id.values())):
            columns[f"probability_{k}"] = [None if v is None else float(np.asarray(v)[k]) for v in scores]
    else:
        columns["probability"] = [None if v is None else float(v) for v in scores]
    columns["model"] = ["split" if i in by_id else ("bank_only" if i in fallback else "") for i in wanted]
    columns["status"] = ["scored" if i in by_id else (missing if i in known else f"unknown to {me}") for i in wanted]
    columns["unseen_categories"] = [";".join((unseen or {}).get(i, ())) for i in wanted]
    out = pd.DataFrame(columns)
    path = folder / "predictions.csv"
    write_atomic(path, out.to_csv(index=False).encode(), within=within)
    models = {k or "none": int(n) for k, n in out["model"].value_counts(sort=False).items()}
    return path, {str(k): int(v) for k, v in out["status"].value_counts().items()}, models


def write_json(path: Path, payload: Any, *, within: Path | None = None) -> Path:
    """``payload`` as indented strict JSON at ``path``, atomically (NumPy scalars as numbers, tuples as lists)."""
    write_atomic(path, (strict_json.dumps(payload, indent=2, default=jsonable) + "\n").encode(), within=within)
    return path


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON: NumPy scalars as numbers, tuples and lists item by item, anything else as text."""
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
