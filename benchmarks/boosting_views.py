"""What a boosting node trains on, rebuilt in one process from the same party folders (for ``benchmarks/boosting.py``).

A ``vsplit train`` party with ``[model] kind = "boosting"`` reads its table, aligns the customers by PSI (sorted-ID
order), encodes and bins its own columns on the aligned rows, and the bank holds out ``train.validation_fraction``
of them (:func:`vsplit.node.boost_state.holdout_mask`, seeded by ``train.seed``). :func:`node_views` does the same
with the node's own functions and a plain join in place of PSI (the same rows in the same order), so the machines run
here on exactly the rows, bins and split of a two-process run and grow the same trees: the benchmark checks that.

Example (not run here: it needs the party folders a benchmark writes):
    >>> views = node_views({"bank": Path("bank/party.toml"), "partner": Path("partner/party.toml")},
    ...                    overrides=["model.kind=boosting"])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def node_views(configs: Mapping[str, Path], *, overrides: list[str]) -> dict[str, Any]:
    """``parties``: per party its codes of the training, held-out and test rows and its ``width``; ``labels`` of
    those rows; the label party's name (``bank``), the ``partners``; the run's ``params`` and ``rounds`` (early
    stopping)."""
    from vsplit.boosting import fit_bins
    from vsplit.config import load_config, resolve
    from vsplit.config.boosting import boost_params
    from vsplit.data.sources import read_table
    from vsplit.node.boost_state import Encoder, holdout_mask
    from vsplit.psi.alignment import plain_join
    from vsplit.psi.ids import IdPolicy, normalise_id

    loaded = {p: load_config(c, overrides=overrides) for p, c in configs.items()}
    tables: dict[str, dict[str, Any]] = {}
    for party, config in loaded.items():
        d = config.data
        read = {split: read_table(resolve(config, path), id_column=d.id_column, features=d.features, label=d.label)
                for split, path in (("train", d.path), ("test", d.test_path))}
        tables[party] = read
    policy = IdPolicy()

    def rows(split: str) -> dict[str, np.ndarray]:
        ids = {p: np.array([normalise_id(v, policy=policy) for v in t[split][loaded[p].data.id_column]],
                           dtype=object) for p, t in tables.items()}
        return plain_join(ids)

    aligned, tested = rows("train"), rows("test")
    out: dict[str, Any] = {"parties": {}}
    bank = next(p for p, c in loaded.items() if c.party.role == "label")
    config = loaded[bank]
    held = holdout_mask(len(aligned[bank]), fraction=config.train.validation_fraction,
                        seed=config.train.seed).astype(bool)
    for party, c in loaded.items():
        d, table = c.data, tables[party]["train"]
        features = [str(col) for col in table.columns if col not in (d.id_column, d.label)]
        encoder = Encoder.fit(table[features], categorical=d.categorical)
        values = encoder.transform(table.iloc[aligned[party]][features])
        bins = fit_bins(values, categorical=encoder.categorical, max_bins=c.boosting.max_bins)
        codes = bins.transform(values)
        test = bins.transform(encoder.transform(tables[party]["test"])[tested[party]])
        out["parties"][party] = {"train": codes[~held], "held": codes[held], "test": test, "width": bins.width}
    d = config.data

    def labels(frame: Any) -> np.ndarray:
        return (frame[d.label].astype(str) == str(d.positive_label)).to_numpy(dtype=np.float64)

    y = labels(tables[bank]["train"].iloc[aligned[bank]])
    out["labels"] = {"train": y[~held], "held": y[held],
                     "test": labels(tables[bank]["test"].iloc[tested[bank]])}
    out["bank"], out["partners"] = bank, [p for p in loaded if p != bank]
    out["params"], out["rounds"] = boost_params(config), config.boosting.early_stopping_rounds
    return out
