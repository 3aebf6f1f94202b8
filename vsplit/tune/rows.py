"""The validation rows of a search: a seeded, stratified part of the label party's training rows.

Only the label party's table is cut (only it has labels to stratify by); every partner keeps all its rows in both
parts, so its preprocessing and bins see its own rows as in a real run. The test rows are never passed here.

Example:
    >>> import pandas as pd
    >>> bank = pd.DataFrame({"id": [str(i) for i in range(10)], "y": [0, 1] * 5})
    >>> shop = pd.DataFrame({"id": [str(i) for i in range(10)], "x": range(10)})
    >>> fit, valid = validation_views({"bank": bank, "shop": shop}, label_party="bank", label="y", fraction=0.2,
    ...                               seed=0)
    >>> len(fit["bank"]), len(valid["bank"]), len(valid["shop"])
    (8, 2, 10)
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def validation_views(views: Mapping[str, pd.DataFrame], *, label_party: str, label: str, fraction: float,
                     seed: int) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """``views`` cut into (inner-train, validation): the label party's rows split ``1 - fraction : fraction``."""
    from sklearn.model_selection import train_test_split

    bank = views[label_party]
    fit_rows, valid_rows = train_test_split(range(len(bank)), test_size=fraction, random_state=seed,
                                            stratify=bank[label])
    fit = {n: (bank.iloc[sorted(fit_rows)].reset_index(drop=True) if n == label_party else t)
           for n, t in views.items()}
    valid = {n: (bank.iloc[sorted(valid_rows)].reset_index(drop=True) if n == label_party else t)
             for n, t in views.items()}
    return fit, valid
