"""Adverse-action reason codes: for each declined applicant, the top-n reasons in plain words.

A reason is an input that pushed the score towards the decline: one of the label party's own columns (its text from
``texts``, the column name where none is given) or a partner as one group ("information held by partner shop",
with the partner's most influential column names where it shares them). Only attributions towards the decline count,
largest first; ties are broken by the order of the columns, so the codes depend only on the model and the rows (the
same seed gives the same model, hence the same codes).

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.explain.explanation import Explanation
    >>> e = Explanation(label_party="bank", ids=["a", "b"], score=np.array([2.0, -2.0]),
    ...                 baseline_score=np.zeros(2),
    ...                 features=pd.DataFrame({"age": [1.5, -1.0], "debt": [0.2, -0.5]}, index=["a", "b"]),
    ...                 groups=pd.DataFrame({"shop": [0.3, -0.5]}, index=["a", "b"]))
    >>> table = reason_codes(e, n=2, texts={"age": "age of the applicant"})
    >>> table[["id", "reason_1", "text_1", "reason_2"]].values.tolist()
    [['a', 'age', 'age of the applicant', 'party:shop']]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.atomic import write_atomic
from vsplit.errors import ConfigError
from vsplit.explain.explanation import GROUP_PREFIX, Explanation

#: the text of a partner group's reason; ``{party}`` stands for the partner's name (in a configured text too)
PARTNER_TEXT = "information held by partner {party}"
DIRECTIONS = ("high", "low")


def reason_codes(explanation: Explanation, *, n: int = 4, texts: Mapping[str, str] | None = None,
                 decline_when: str = "high", threshold: float = 0.5, declined_only: bool = True) -> pd.DataFrame:
    """The top-``n`` reasons of each declined row (every row with ``declined_only=False``).

    Args:
        explanation: the attributions (:meth:`SplitClassifier.explain`, ``vsplit explain``).
        n: reasons per row, at most.
        texts: plain-words text per own column or partner name (default: the name itself; a partner's default is
            :data:`PARTNER_TEXT`).
        decline_when: ``"high"``: a probability at or above ``threshold`` declines (a default or risk score; its
            reasons push the score up); ``"low"``: below ``threshold`` declines (an approval or propensity score).
        threshold: the decision threshold on the probability.

    Returns:
        one row per explained customer: ``id``, ``probability``, ``declined``, then ``reason_i``, ``text_i`` and
        ``contribution_i`` (in the score's units, log-odds) for i = 1..n (empty where fewer reasons exist).
    """
    if decline_when not in DIRECTIONS:
        raise ConfigError(f"decline_when must be one of {DIRECTIONS}, got {decline_when!r}")
    if n < 1:
        raise ConfigError(f"reason codes: n must be at least 1, got {n}")
    texts = dict(texts or {})
    own = explanation.features
    groups = explanation.groups
    codes = [*own.columns, *(GROUP_PREFIX + g for g in groups.columns)]
    values = np.concatenate([own.to_numpy(), groups.to_numpy()], axis=1)
    sign = 1.0 if decline_when == "high" else -1.0
    toward = sign * values
    probability = 1 / (1 + np.exp(-np.asarray(explanation.score, dtype=float)))
    declined = probability >= threshold if decline_when == "high" else probability < threshold
    rows = []
    for i, row_id in enumerate(explanation.ids):
        if declined_only and not declined[i]:
            continue
        order = np.argsort(-toward[i], kind="stable")
        record: dict[str, Any] = {"id": row_id, "probability": float(probability[i]), "declined": bool(declined[i])}
        picked = [j for j in order if toward[i, j] > 0][:n]
        for rank in range(n):
            j = picked[rank] if rank < len(picked) else None
            record[f"reason_{rank + 1}"] = codes[j] if j is not None else ""
            record[f"text_{rank + 1}"] = _text(codes[j], texts, explanation, i) if j is not None else ""
            record[f"contribution_{rank + 1}"] = float(values[i, j]) if j is not None else np.nan
        rows.append(record)
    columns = ["id", "probability", "declined", *(f"{k}_{r}" for r in range(1, n + 1)
                                                  for k in ("reason", "text", "contribution"))]
    return pd.DataFrame(rows, columns=columns)


def _text(code: str, texts: Mapping[str, str], explanation: Explanation, row: int) -> str:
    if not code.startswith(GROUP_PREFIX):
        return texts.get(code, code)
    party = code[len(GROUP_PREFIX):]
    text = texts.get(party, PARTNER_TEXT).replace("{party}", party)
    top = explanation.top.get(party)
    if top:
        text += f" (mainly {', '.join(top[row])})"
    return text


def reasons_json(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The reason-code table as JSON records: ``{id, probability, declined, reasons: [{code, text,
    contribution}]}``."""
    n = sum(1 for c in table.columns if c.startswith("reason_"))
    out = []
    for record in table.to_dict(orient="records"):
        reasons = [{"code": record[f"reason_{r}"], "text": record[f"text_{r}"],
                    "contribution": round(float(record[f"contribution_{r}"]), 6)}
                   for r in range(1, n + 1) if record[f"reason_{r}"]]
        out.append({"id": record["id"], "probability": round(float(record["probability"]), 6),
                    "declined": bool(record["declined"]), "reasons": reasons})
    return out


def write_reasons(table: pd.DataFrame, folder: Path, *, within: Path | None = None) -> tuple[Path, Path]:
    """Write ``reasons.csv`` and ``reasons.json`` into ``folder`` (atomically; ``within``: the run folder no folder
    below which may be a link); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = folder / "reasons.csv", folder / "reasons.json"
    write_atomic(csv_path, table.to_csv(index=False).encode(), within=within)
    write_atomic(json_path, (json.dumps(reasons_json(table), indent=2) + "\n").encode(), within=within)
    return csv_path, json_path
