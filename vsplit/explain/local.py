"""Explain a fitted :class:`~vsplit.estimator.SplitClassifier` (or regressor) in this one process: every party's
explanation session over memory channels and the real codec, the frames a networked run would send.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.estimator import SplitClassifier
    >>> rng = np.random.default_rng(0)
    >>> ids = [str(i) for i in range(300)]
    >>> x, age = rng.normal(size=300), rng.normal(size=300)
    >>> views = {"bank": pd.DataFrame({"customer_id": ids, "age": age, "y": (x + age > 0).astype(int)}),
    ...          "shop": pd.DataFrame({"customer_id": ids, "x": x})}
    >>> clf = SplitClassifier(epochs=2, random_state=0).fit(views)
    >>> e = explain_views(clf, views, steps=16)
    >>> list(e.features.columns), list(e.groups.columns)
    (['age'], ['shop'])
    >>> bool(np.allclose(e.partners["shop"].sum(axis=1), e.groups["shop"]))  # the group is the sum of its columns
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from sklearn.utils.validation import check_is_fitted

from vsplit.app.local import run_sessions
from vsplit.errors import DataError
from vsplit.explain.explanation import Explanation
from vsplit.explain.knots import not_piecewise_linear
from vsplit.explain.session import STAGES, explain_session, explanation_of


def explain_views(estimator: Any, views: Mapping[str, pd.DataFrame], *, steps: int = 32, chunk: int = 256,
                  share_top_k: int | Mapping[str, int] = 0, method: str = "auto",
                  taps: Iterable[Any] = ()) -> Explanation:
    """Attributions of ``estimator``'s score for the label party's rows that every party knows (see
    :meth:`SplitClassifier.explain <vsplit.estimator.SplitClassifier.explain>`); ``taps`` see every frame sent."""
    check_is_fitted(estimator, "result_")
    est = estimator
    label = est.label_party
    prepared = {label: est.label_party_.prepare(views[label])}
    for name, party in est.feature_parties_.items():
        if name not in views:
            raise DataError(f"explaining needs party {name!r}'s table as well (the model was trained with it)")
        prepared[name] = party.prepare(views[name])
    holders = est.topology_.row_holders() if est.mode != "label_party_only" else (label,)
    rows = est._align({n: prepared[n][0] for n in holders}, store=False)
    run = est._run_topology()
    shares = share_top_k if isinstance(share_top_k, Mapping) else {n: share_top_k for n in est.feature_parties_}
    method, note = resolve_method(method, {seg.name: est.modules_[seg.name] for seg in run.segments}, steps)

    def picked(name: str) -> Any:
        inputs = prepared[name][1]
        return None if inputs is None else tuple(t[rows[name]] for t in inputs)

    placed = {}
    if run is not est.topology_:  # a baseline: every segment at the label party
        for seg in run.segments:
            owner = est.topology_.segment(seg.name).owner
            if seg.is_source and owner != label and owner in rows:
                placed[seg.name] = (est.modules_[seg.name], est._party(owner), picked(owner))
    sessions = {
        name: explain_session(est._party(name), run, prepared.get(name), rows=rows.get(name), steps=steps,
                              chunk=chunk, share_top_k=int(shares.get(name, 0)), method=method,
                              placed=placed if name == label else None)
        for name in run.parties
    }
    outcomes = run_sessions(sessions, session=est._session("explain"), taps=taps, order=STAGES.index)
    ids = [str(v) for v in prepared[label][0][rows[label]]]
    mine = outcomes[label].result
    explanation = explanation_of(label, ids, mine)
    explanation.note = explanation.note or note
    own = [c for c in mine.columns if not any(c.startswith(f"{p}.") for p in est.feature_parties_)]
    values, explanation.features = explanation.features, explanation.features[own]
    for name in est.feature_parties_:
        if name in outcomes and name != label and outcomes[name].result.columns:
            result = outcomes[name].result
            explanation.partners[name] = pd.DataFrame(result.values, columns=result.columns, index=ids)
        placed_columns = [c for c in mine.columns if c.startswith(f"{name}.")]
        if placed_columns:  # a baseline run: the partner's columns were attributed at the label party
            explanation.partners[name] = values[placed_columns].rename(columns=lambda c, n=name: c[len(n) + 1:])
            explanation.groups[name] = explanation.partners[name].to_numpy().sum(axis=1)
    return explanation


def resolve_method(method: str, modules: Mapping[str, Any], steps: int) -> tuple[str, str]:
    """``"auto"`` with every segment at hand: exact if all are piecewise linear, else the quadrature and why."""
    if method != "auto":
        return method, ""
    for name, module in modules.items():
        part = not_piecewise_linear(module)
        if part is not None:
            return "quadrature", (f"quadrature with {steps} nodes, not exact: segment {name!r} has a {part}, which "
                                  "is not piecewise linear")
    return "exact", ""
