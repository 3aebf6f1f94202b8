"""One party's explanation run, written once: align the rows to explain by PSI, then explain them jointly.

Like :func:`vsplit.app.session.score_session`, this is a generator of ``(stage, machine)`` pairs: the in-process
runner drives every party's session over memory channels (``SplitClassifier.explain``), and a party process drives
its own over mutual TLS (``vsplit explain``). Stages: ``"psi"`` (where the topology aligns rows), then
``"explain"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from vsplit.app.session import AnyParty, Outcome, PsiSettings, Session, psi_machine
from vsplit.data.tables import all_ids
from vsplit.errors import ConfigError
from vsplit.explain.explanation import Explanation
from vsplit.explain.machine import ExplainMachine, PartyExplanation, Source
from vsplit.explain.paths import Baseline, column_names
from vsplit.party import LabelParty
from vsplit.psi.alignment import canonical_rows
from vsplit.topology.graph import Topology

#: the stages of an explanation, in order (for the in-process runner)
STAGES = ("psi", "explain")


def input_columns(party: Any) -> list[str]:
    """The table column each model input of ``party`` comes from (categorical codes, numbers, missing flags)."""
    prep = party.preprocessor
    imputed = [c for c in prep.numeric_ if c in getattr(prep, "imputed_", {})]
    return column_names(prep.categorical_, prep.numeric_, imputed)


def baseline_inputs(party: Any, fallback: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
    """The rows a party's baseline is the mean of: its training rows (``fallback``, the rows explained, when it
    streams its table and holds none in memory)."""
    inputs = getattr(party, "inputs", None)
    if inputs is None or len(inputs[1]) == 0:
        return fallback
    return inputs


def explain_machine(party: AnyParty, topology: Topology, picked: Sequence[torch.Tensor] | None, *,
                    n_rows: int | None, steps: int = 32, chunk: int = 256, share_top_k: int = 0,
                    method: str = "auto",
                    placed: Mapping[str, tuple[nn.Module, Any, Sequence[torch.Tensor]]] | None = None,
                    ) -> ExplainMachine:
    """``party``'s explanation machine over its rows ``picked`` (aligned order).

    ``placed`` (the label party of a baseline run, every segment at one place) maps another party's source segment
    to ``(module, its owner, the owner's rows)``; that owner's columns are named ``<owner>.<column>``.
    """
    width = party.task_width if isinstance(party, LabelParty) else 1
    if isinstance(party, LabelParty) and width != 1:
        raise ConfigError("explain attributes one score: a binary or regression model; a multiclass model has one "
                          "score per class, which explain does not attribute yet")
    placed = dict(placed or {})
    modules = {**party.modules_for(topology, task_width=width, skip=list(placed)),
               **{seg: module for seg, (module, _, _) in placed.items()}}
    sources = {}
    for seg in topology.segments_of(party.name):
        if not seg.is_source:
            continue
        owner, rows = (party, picked) if seg.name not in placed else placed[seg.name][1:]
        if rows is None:
            raise ConfigError(f"{party.name}: segment {seg.name!r} needs rows to explain")
        columns = input_columns(owner)
        if owner is not party:
            columns = [f"{owner.name}.{c}" for c in columns]
        saved = getattr(owner, "baseline", None)  # a party loaded from a file keeps its training rows' baseline
        baseline = saved if saved is not None else Baseline.fit(modules[seg.name], baseline_inputs(owner, rows))
        sources[seg.name] = Source(inputs=rows, baseline=baseline, columns=columns)
    return ExplainMachine(party.name, topology, modules, sources=sources, n_rows=n_rows, steps=steps, chunk=chunk,
                          share_top_k=share_top_k, method=method)


def explain_session(party: AnyParty, topology: Topology, inputs: tuple[np.ndarray, Any] | None, *,
                    psi: PsiSettings | None = None, rows: np.ndarray | None = None, steps: int = 32,
                    chunk: int = 256, share_top_k: int = 0, psi_stage: str = "psi", method: str = "auto",
                    placed: Mapping[str, tuple[nn.Module, Any, Sequence[torch.Tensor]]] | None = None) -> Session:
    """Align ``inputs`` (``(ids, model inputs)`` of the rows to explain; ``None`` for a party without rows) with
    the peers, then explain jointly (``method``, ``placed``: see :func:`explain_machine`); the outcome's ``result``
    is this party's :class:`~vsplit.explain.machine.PartyExplanation`, and ``rows`` its aligned rows."""
    ids, tensors = inputs if inputs is not None else (None, None)
    outcome = Outcome(rows=rows)
    if rows is None and ids is not None:
        if topology.alignment_groups():
            outcome.alignment = yield psi_stage, psi_machine(party.name, topology, ids, psi)
            outcome.rows = canonical_rows(outcome.alignment)
        else:
            outcome.rows = np.argsort(all_ids(ids), kind="stable")
    picked = None
    if tensors is not None and outcome.rows is not None:
        index = torch.from_numpy(np.asarray(outcome.rows, dtype=np.int64))
        picked = tuple(t[index] for t in tensors)
    machine = explain_machine(party, topology, picked, n_rows=None if outcome.rows is None else len(outcome.rows),
                              steps=steps, chunk=chunk, share_top_k=share_top_k, method=method, placed=placed)
    outcome.result = yield "explain", machine
    return outcome


def explanation_of(label_party: str, ids: list[str], result: PartyExplanation) -> Explanation:
    """The label party's :class:`Explanation` from its machine's result for the rows ``ids`` (aligned order)."""
    features = pd.DataFrame(result.values, columns=result.columns, index=ids)
    groups = pd.DataFrame({p: v for p, v in result.groups.items()}, index=ids)
    return Explanation(label_party=label_party, ids=ids, score=np.asarray(result.score),
                       baseline_score=np.asarray(result.baseline_score), features=features, groups=groups,
                       top=dict(result.top), steps=result.steps, method=result.method, knots=result.knots,
                       note=result.note)
