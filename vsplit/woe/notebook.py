"""The notebook front door of the value report: :func:`information_value` over views held in one process.

It aligns the parties' customers as the notebook estimators do (PSI in this process, or a plain join), lets each
party bin its own attributes on its aligned rows, and runs the label party's :class:`~vsplit.woe.label.LabelWoe` and
every partner's :class:`~vsplit.woe.partner.PartnerWoe` over in-memory channels and the real codec
(:mod:`vsplit.runtime.inprocess`): the frames a run between organizations would send.

Example:
    >>> import numpy as np, pandas as pd, warnings
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(400)]
    >>> x, age = rng.normal(size=400), rng.normal(size=400)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0.5).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids[::-1], "x": x[::-1], "noise": rng.normal(size=400)})}
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     out = information_value(views, key_bits=1024, insecure_small_key_for_tests=True, share_names={"shop": True})
    >>> out.report.summary()[["party", "attribute", "band"]].values.tolist()
    [['shop', 'x', 'strong'], ['bank', 'age', 'strong'], ['shop', 'noise', 'weak']]
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from vsplit.data.labels import positive_class
from vsplit.data.tables import normalise_ids
from vsplit.errors import DataError
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.psi import align_estimator_rows
from vsplit.woe.classing import ClassingParams
from vsplit.woe.fine import fit_fine_bins
from vsplit.woe.label import LabelWoe
from vsplit.woe.partner import PartnerWoe
from vsplit.woe.result import PartyBinning, ValueReport

__all__ = ["InformationValue", "information_value", "labels_of"]


@dataclass
class InformationValue:
    """What :func:`information_value` gives: the label party's ``report`` (every party's binning tables) and each
    party's own ``binnings`` (its WOE maps and IVs; in one process here, each kept by its party in a real run), with
    each party's aligned ``rows`` of its view."""

    report: ValueReport
    binnings: dict[str, PartyBinning]
    rows: dict[str, np.ndarray]


def labels_of(column: pd.Series, *, name: str, party: str, positive_label: object = None) -> np.ndarray:
    """0/1 labels of a label column, or a :class:`DataError` naming the column and the party (missing values, more
    than two values, a positive label that is not there).

    Example:
        >>> labels_of(pd.Series(["no", "yes", "yes"]), name="y", party="bank").tolist()
        [0.0, 1.0, 1.0]
        >>> labels_of(pd.Series([0.0, 1.0]), name="y", party="bank").tolist()
        [0.0, 1.0]
        >>> labels_of(pd.Series(["no", "yes", "maybe"]), name="y", party="bank")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        vsplit.errors.DataError: woe: label 'y' of party 'bank' has 3 values ['maybe', 'no', 'yes']; WOE and IV ...
    """
    if column.isna().any():
        raise DataError(f"woe: label {name!r} of party {party!r} has {int(column.isna().sum())} missing values; "
                        "drop those rows")
    values = set(pd.unique(column).tolist())
    if positive_label is None and len(values) > 2:
        raise DataError(f"woe: label {name!r} of party {party!r} has {len(values)} values "
                        f"{sorted(map(str, values))}; WOE and IV need a binary label (set positive_label to make one "
                        "of them the event)")
    positive = positive_label if positive_label is not None else positive_class(values, name)
    if positive in values:  # equal values: 1 and 1.0, True and 1
        return (column == positive).to_numpy(dtype=np.float64)
    if str(positive) not in {str(v) for v in values}:
        raise DataError(f"woe: label {name!r} of party {party!r} never holds positive_label {positive!r}")
    return (column.astype(str) == str(positive)).to_numpy(dtype=np.float64)


def information_value(views: Mapping[str, pd.DataFrame], *, label_party: str = "bank", label: str = "y",
                      id_column: str = "customer_id", positive_label: object = None,
                      categorical: Mapping[str, Sequence[str]] | None = None, fine_bins: int = 20,
                      min_bin_rows: Mapping[str, int] | int = 1, share_names: Mapping[str, bool] | bool = False,
                      min_bin_share: float = 0.05, monotonic: str = "auto", max_coarse_bins: int = 10,
                      scheme: str = "ou", key_bits: int = 2048, insecure_small_key_for_tests: bool = False,
                      alignment: str = "psi", random_state: int = 0, taps: Iterable[Any] = (),
                      report_gini: bool = False, validation_share: float = 0.3, gini_draws: int = 200,
                      scorecard: Any = None, keys: Any = None) -> InformationValue:
    """WOE binning and IV of every attribute of every party, the labels staying with ``label_party``.

    Args:
        views: ``{party: DataFrame}``, each with the ID column; the label party's with the label column.
        categorical: per party, its categorical columns (default: the text columns).
        fine_bins: fine (quantile) bins per numeric attribute.
        min_bin_rows: per partner (or for all): no fine bin of fewer rows.
        share_names: per partner (or for all): whether the report names its attributes (else ``<party>#<k>``).
        min_bin_share, monotonic, max_coarse_bins: the coarse classing (:class:`~vsplit.woe.classing.ClassingParams`).
        scheme, key_bits, insecure_small_key_for_tests: the homomorphic encryption (tests only: small keys).
        alignment: ``"psi"`` (default) or ``"join"``; ``random_state``: the PSI session's context.
        taps: frame taps of the in-memory channels (tests).
        report_gini: also fit a bank-only and a joint scorecard on every binned attribute, holding out a
            ``validation_share`` of the aligned rows (seeded by ``random_state``), and put both Ginis on those rows
            and a paired bootstrap interval (``gini_draws`` resamples) of their difference in the report
            (:mod:`vsplit.woe.gini`; ``report.gini``); ``scorecard``: its :class:`~vsplit.scorecard.ScorecardParams`
            (default: the defaults).
        keys: the label party's key pair (:func:`vsplit.he.generate_keypair`; default: one made here from ``scheme``
            and ``key_bits``), e.g. the one a scorecard trained next reuses.

    Raises:
        DataError: a label that is not binary, an attribute with a single value, a bin under the minimum size.
    """
    if label_party not in views:
        raise DataError(f"woe: no view of the label party {label_party!r}; views are {sorted(views)}")
    partners = [n for n in views if n != label_party]
    categorical = categorical or {}
    ids = {}
    for name, view in views.items():
        if id_column not in view.columns:
            raise DataError(f"woe: party {name!r} has no ID column {id_column!r}; set id_column")
        ids[name] = normalise_ids(view[id_column])
    if label not in views[label_party].columns:
        raise DataError(f"woe: party {label_party!r} has no label column {label!r}; set label")
    rows, _ = align_estimator_rows(ids, label_party=label_party, alignment=alignment, random_state=random_state)
    labels = labels_of(views[label_party][label], name=label, party=label_party,
                       positive_label=positive_label)[rows[label_party]]

    def setting(value: Mapping[str, Any] | Any, party: str, default: Any) -> Any:
        return value.get(party, default) if isinstance(value, Mapping) else value

    machines: dict[str, Any] = {}
    for name in (label_party, *partners):
        table = views[name].iloc[rows[name]].drop(columns=[c for c in (id_column, label) if c in views[name].columns])
        fine = fit_fine_bins(table.reset_index(drop=True), categorical=tuple(categorical.get(name, ())),
                             max_bins=fine_bins, min_bin_rows=setting(min_bin_rows, name, 1), party=name)
        codes = np.column_stack([f.codes(table[f.name]) for f in fine])
        if name == label_party:
            machines[name] = LabelWoe(fine, codes=codes, labels=labels, partners=partners, name=name,
                                      params=ClassingParams(min_bin_share=min_bin_share, monotonic=monotonic,
                                                            max_bins=max_coarse_bins),
                                      scheme=scheme, key_bits=key_bits, keys=keys,
                                      insecure_small_key_for_tests=insecure_small_key_for_tests)
        else:
            machines[name] = PartnerWoe(fine, codes=codes, label=label_party,
                                        share_names=bool(setting(share_names, name, False)),
                                        min_bin_rows=setting(min_bin_rows, name, 1), schemes=(scheme,),
                                        min_key_bits=min(key_bits, 2048),
                                        insecure_small_key_for_tests=insecure_small_key_for_tests)
    session = hashlib.sha256(f"vsplit-woe-{random_state}".encode()).digest()[:16]
    results = run_machines(connect([label_party, *partners], session=session, taps=taps), machines)
    report: ValueReport = results[label_party]
    assert report.own is not None
    binnings = {label_party: report.own, **{p: results[p] for p in partners}}
    if report_gini and partners:
        from vsplit.scorecard import Scaling, ScorecardParams, columns_from_maps
        from vsplit.woe.gini import add_to_report, label_stages, partner_stages

        columns = {n: columns_from_maps(b.maps, views[n].iloc[rows[n]].reset_index(drop=True))
                   for n, b in binnings.items()}
        small = {"insecure_small_key_for_tests": insecure_small_key_for_tests}
        stages = {label_party: label_stages(columns[label_party], labels=labels, partners=partners,
                                            params=scorecard or ScorecardParams(), scaling=Scaling(),
                                            share=validation_share, seed=random_state, draws=gini_draws,
                                            name=label_party, scheme=scheme, key_bits=key_bits, **small),
                  **{p: partner_stages(columns[p], label=label_party, schemes=(scheme,),
                                       min_key_bits=min(key_bits, 2048), **small) for p in partners}}
        add_to_report(report, _drive(stages, label_party, session=session, taps=taps))
    return InformationValue(report=report, binnings=binnings, rows=rows)


def _drive(stages: Mapping[str, Any], label_party: str, *, session: bytes, taps: Iterable[Any]) -> Any:
    """Run every party's stages (generators of ``(stage, machine)``) in step over in-memory channels; the label
    party's outcome."""
    pending = {n: next(g) for n, g in stages.items()}
    outcome = None
    while pending:
        stage = next(iter(pending.values()))[0]
        key = hashlib.sha256(session + stage.encode()).digest()[:16]
        results = run_machines(connect(list(pending), session=key, taps=taps), {n: m for n, (_, m) in
                                                                                  pending.items()})
        following = {}
        for name, result in results.items():
            try:
                following[name] = stages[name].send(result)
            except StopIteration as stop:
                if name == label_party:
                    outcome = stop.value
        pending = following
    return outcome
