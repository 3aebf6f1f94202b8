"""``vsplit explain`` in one organization's process: explain its saved split model's score with its peers over
mutual TLS, each party keeping its own columns' attributions.

Every party runs ``vsplit explain --config party.toml --input rows`` (a compute party without ``--input``) with the
same ``--job``. PSI aligns the rows; then the explanation machines (:mod:`vsplit.explain.machine`) exchange the path's
activations and gradients in their own session (``<run_id>:explain``). Outputs, in
``<output.dir>/<run_id>/<party>/explanations/<job>/``:

- label party: ``explanations.csv`` (per row: ID, score, baseline score, each own column's attribution, each
  partner's group as ``party:<name>``), ``reasons.csv`` and ``reasons.json`` (reason codes of the declined rows,
  ``[explain]`` settings), ``explain.json`` (counts, completeness, global importance, traffic);
- a party with columns: ``attributions.csv``, its own columns' attributions per row, which never leave it, and
  ``explain.json``;
- a compute party: ``explain.json``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.atomic import write_atomic
from vsplit.config import PartyConfig
from vsplit.data.sources import about_file
from vsplit.errors import ConfigError
from vsplit.explain.explanation import Explanation
from vsplit.explain.machine import PartyExplanation
from vsplit.explain.messages import MAX_PATH_ROWS, MAX_TOP_K, METHODS
from vsplit.explain.reasons import DIRECTIONS, reason_codes, write_reasons
from vsplit.explain.session import explain_session, explanation_of
from vsplit.party import LabelParty
from vsplit.runtime.jobs import default_job_id
from vsplit.transport.channel import Channel

FOLDER = "explanations"
_JOB = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_settings(config: PartyConfig) -> None:
    """Refuse ``[explain]`` settings out of range, naming the key and the fix."""
    ex = config.explain
    problems = []
    if not 1 <= ex.steps <= 512:
        problems.append(f"explain.steps: must be 1 to 512, got {ex.steps}")
    if not 1 <= ex.chunk <= 65536:
        problems.append(f"explain.chunk: must be 1 to 65536, got {ex.chunk}")
    if ex.chunk * (ex.steps + 2) > MAX_PATH_ROWS:
        problems.append(f"explain.chunk, explain.steps: chunk x (steps + 2) must be at most {MAX_PATH_ROWS} path "
                        f"rows (a bound on every party's memory), got {ex.chunk * (ex.steps + 2)}; lower chunk")
    if ex.method not in ("auto", *METHODS):
        problems.append(f"explain.method: must be 'auto', 'exact' or 'quadrature', got {ex.method!r}")
    if not 0 <= ex.share_top_k <= MAX_TOP_K:
        problems.append(f"explain.share_top_k: must be 0 (share nothing) to {MAX_TOP_K}, got {ex.share_top_k}")
    if ex.reasons < 1:
        problems.append(f"explain.reasons: must be at least 1, got {ex.reasons}")
    if ex.decline_when not in DIRECTIONS:
        problems.append(f"explain.decline_when: must be 'high' or 'low', got {ex.decline_when!r}")
    if not 0 < ex.threshold < 1:
        problems.append(f"explain.threshold: a probability strictly between 0 and 1, got {ex.threshold}")
    if problems:
        raise ConfigError(f"{config.source}: " + "; ".join(problems))


def explain_party(config: PartyConfig, input_path: Path | None, *, job: str | None = None,
                  channels: Mapping[str, Channel] | None = None) -> Path:
    """Explain ``input_path``'s rows with the peers (``channels``: already open; default: dial and listen as
    configured); the path of this party's ``explain.json``."""
    from vsplit.node import PartyNode
    from vsplit.node.aligned import AlignedNode

    check_settings(config)
    job = job or default_job_id()
    if not _JOB.fullmatch(job):
        raise ConfigError(f"--job {job!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    began = time.perf_counter()
    node = PartyNode(config, progress=False)
    if config.model.kind == "boosting":
        return _explain_trees(config, node, input_path, job=job, channels=channels, began=began)
    if config.model.kind == "ensemble":  # networks and trees: the combination's contributions
        return _explain_ensemble(config, node, input_path, job=job, channels=channels, began=began)
    if not isinstance(node, AlignedNode):
        raise ConfigError(f"{config.source}: vsplit explain explains vertical, vanilla and U-shaped splits, not "
                          f"{config.topology.kind!r}")
    node.load_model()
    if len(node.networks) > 1:
        raise ConfigError(f"{config.source}: run {config.output.run_id!r} is a bag of {len(node.networks)} networks "
                          "(train.networks): its score is the mean of their probabilities, which one network's "
                          "attributions do not add up to, and vsplit explain explains one network; explain a run "
                          "trained with train.networks = 1")
    table, _ = node.read_input(input_path, None)
    folder = node.folder / FOLDER / job
    folder.mkdir(parents=True, exist_ok=True)
    with about_file(input_path):
        prepared = node.party.prepare(table) if table is not None else None
    ex = config.explain
    session = explain_session(node.party, node.topology, prepared,
                              psi=node.psi_settings("explain", state_dir=folder / "psi-state"), steps=ex.steps,
                              chunk=ex.chunk, share_top_k=ex.share_top_k, method=ex.method)
    channels = dict(channels) if channels is not None else node.open_channels()
    pump = node.pump(channels, purpose=":explain")
    outcome = node.drive(session, channels, pump)
    summary: dict[str, Any] = {"run_id": config.output.run_id, "party": node.name, "job": job,
                               "communication": pump.stats.as_dict()}
    result: PartyExplanation = outcome.result
    rows = outcome.rows
    if prepared is not None and rows is not None:
        ids = [str(v) for v in prepared[0][rows]]
        summary["rows"] = len(ids)
        if isinstance(node.party, LabelParty):
            summary.update(_label_outputs(config, explanation_of(node.name, ids, result), folder))
            summary.update(_bank_only_outputs(config, node, table, rows, folder))
        elif result.columns:
            local = pd.DataFrame(result.values, columns=result.columns)
            local.insert(0, config.data.id_column, ids)
            write_atomic(folder / "attributions.csv", local.to_csv(index=False).encode(), within=node.folder)
            summary["attributions"] = "attributions.csv (kept by this party; never sent)"
            summary["shared_top_k"] = ex.share_top_k
    summary["seconds"] = round(time.perf_counter() - began, 3)
    path = folder / "explain.json"
    write_atomic(path, (json.dumps(summary, indent=2, default=_plain) + "\n").encode(), within=node.folder)
    return path


def _explain_trees(config: PartyConfig, node: Any, input_path: Path | None, *, job: str,
                   channels: Mapping[str, Channel] | None, began: float) -> Path:
    """``vsplit explain`` of a boosted-trees run (:class:`~vsplit.node.boost.BoostNode`): PSI, then the prediction
    round of ``vsplit predict`` (each partner answers its decision bits, nothing more); the label party credits each
    split's change of the node value to the party owning it (:mod:`vsplit.explain.path`) and writes the files a
    network's explanation has. A partner learns nothing beyond what prediction shows it and writes no attributions:
    it does not know the trees' values."""
    from vsplit.boosting.explain import kept_values
    from vsplit.explain.path import explain_trees

    node.load_model()
    values = kept_values(node.model, node.params) if node.role == "label" else None  # fails before any peer is dialed
    table, _ = node.read_input(input_path, None)
    folder = node.folder / FOLDER / job
    folder.mkdir(parents=True, exist_ok=True)
    session = _trees_session(node, table, psi=node.psi_settings("explain", state_dir=folder / "psi-state"),
                             source=input_path)
    channels = dict(channels) if channels is not None else node.open_channels()
    pump = node.pump(channels, purpose=":explain")
    rows, codes, bits = node.drive(session, channels, pump)
    ids = [str(v) for v in table[config.data.id_column].to_numpy()[rows]]
    summary: dict[str, Any] = {"run_id": config.output.run_id, "party": node.name, "job": job,
                               "communication": pump.stats.as_dict(), "rows": len(ids)}
    if node.role == "label":
        explanation = explain_trees(node.model, values or [], own_codes=codes, decisions=bits, ids=ids,
                                    own_columns=list(node.encoder.columns), partners=node.partners,
                                    label_party=node.name)
        summary.update(_label_outputs(config, explanation, folder))
    else:
        summary["attributions"] = "none: this party answered its decision bits; the bank attributes the splits"
        summary["shared_top_k"] = 0  # [explain] share_top_k: a boosting run names no partner column
    summary["seconds"] = round(time.perf_counter() - began, 3)
    path = folder / "explain.json"
    write_atomic(path, (json.dumps(summary, indent=2, default=_plain) + "\n").encode(), within=node.folder)
    return path


def _trees_session(node: Any, table: pd.DataFrame, *, psi: Any, source: Path | None) -> Any:
    """PSI of ``table``'s customers, then one prediction round keeping the partners' bits at the label party; the
    outcome is ``(aligned rows, this party's codes of them, the bits by partner index or None)``."""
    from vsplit.app.session import psi_machine
    from vsplit.boosting.explain import ExplainPredict
    from vsplit.boosting.predict import PartnerPredict
    from vsplit.psi.alignment import canonical_rows

    with about_file(source):
        values = node.encoder.transform(table)
    alignment = yield "psi", psi_machine(node.name, node.topology, table[node.config.data.id_column], psi)
    rows = canonical_rows(alignment)
    codes = node.bins.transform(values[rows])
    machine: Any = ExplainPredict(node.model, own_codes=codes, partners=node.partners) if node.role == "label" \
        else PartnerPredict(node.model, codes=codes, label=node.hub)
    yield "explain", machine
    return rows, codes, getattr(machine, "bits", None)


def _points_session(node: Any, table: pd.DataFrame, *, source: Path | None, state: Path) -> Any:
    """The scorecard's scoring of ``table`` (PSI, then each partner's points); the outcome is ``(aligned rows, this
    party's bins of them, the label party's ScoredPoints or None)``, as :func:`_trees_session`'s."""
    from vsplit.scorecard import columns_from_maps

    scored = yield from node.score_session(table, source=source, psi_stage="psi", psi_state=state)
    with about_file(source):
        codes = columns_from_maps(node.maps, table.iloc[scored.rows].reset_index(drop=True)).codes
    return scored.rows, codes, node._points[1] if node.role == "label" else None


def _explain_ensemble(config: PartyConfig, node: Any, input_path: Path | None, *, job: str,
                      channels: Mapping[str, Channel] | None, began: float) -> Path:
    """``vsplit explain`` of an ensemble run (:class:`~vsplit.node.ensemble.EnsembleNode`): the per-party
    contributions of the combination, as :meth:`vsplit.ensemble.SplitEnsemble.explain` defines them in memory.

    Over one pump: PSI of the rows and each network of the bag's explanation machines in turn on those aligned rows
    (a network run's exchange), then the trees' PSI and prediction round keeping the partners' decision bits at the
    bank (a trees run's), or the scorecard's scoring round (each partner's points). The bank weighs each network's
    explanation by ``w / networks`` and the trees' path attribution (or the scorecard's points as log-odds,
    :mod:`vsplit.explain.points`) by ``1 - w`` (:func:`vsplit.ensemble.weighted_explanation`): its own columns'
    and each partner's contributions add up to the ensemble's log-odds, written as a network run's. A partner keeps
    each network's attributions of its own columns (their weighted sum needs ``w``, which only the bank holds)."""
    from vsplit.boosting.explain import kept_values
    from vsplit.ensemble import weighted_explanation
    from vsplit.explain.path import explain_trees

    node.load_model()
    trees, card = node.trees, node.second == "scorecard"
    values = kept_values(trees.model, trees.params) if node.role == "label" and not card else None  # before dialing
    table, _ = node.read_input(input_path, None)
    folder = node.folder / FOLDER / job
    folder.mkdir(parents=True, exist_ok=True)
    session = _ensemble_session(node, table, folder=folder, source=input_path)
    channels = dict(channels) if channels is not None else node.open_channels()
    pump = node.pump(channels, purpose=":explain")
    rows, results, (tree_rows, codes, bits) = node.drive(session, channels, pump)
    ids = [str(v) for v in table[config.data.id_column].to_numpy()[rows]]
    summary: dict[str, Any] = {"run_id": config.output.run_id, "party": node.name, "job": job,
                               "communication": pump.stats.as_dict(), "rows": len(ids)}
    if node.role == "label":
        share = node.weight / len(results)
        parts = [(share, explanation_of(node.name, ids, result)) for result in results]
        tree_ids = [str(v) for v in table[config.data.id_column].to_numpy()[tree_rows]]
        if card:  # the scorecard's points as log-odds (vsplit.explain.points); codes: the bank's bins of the rows
            from vsplit.explain.points import points_explanation

            parts.append((1 - node.weight, points_explanation(
                bits, label_party=node.name, ids=tree_ids, own=trees.points_table(), own_codes=codes,
                scaling=trees.scaling, intercept=trees.intercept)))
        else:
            parts.append((1 - node.weight, explain_trees(trees.model, values or [], own_codes=codes, decisions=bits,
                                                         ids=tree_ids, own_columns=list(trees.encoder.columns),
                                                         partners=trees.partners, label_party=node.name)))
        summary.update(_label_outputs(config, weighted_explanation(parts), folder), weight=node.weight)
    elif results and results[0].columns:
        frames = [pd.DataFrame(r.values, columns=[f"{c}@network{k}" for c in r.columns]) for k, r in enumerate(results)]
        local = pd.concat(frames, axis=1)
        local.insert(0, config.data.id_column, ids)
        write_atomic(folder / "attributions.csv", local.to_csv(index=False).encode(), within=node.folder)
        summary["attributions"] = "attributions.csv, each network's (kept by this party; never sent)"
        summary["shared_top_k"] = config.explain.share_top_k
    summary["seconds"] = round(time.perf_counter() - began, 3)
    path = folder / "explain.json"
    write_atomic(path, (json.dumps(summary, indent=2, default=_plain) + "\n").encode(), within=node.folder)
    return path


def _ensemble_session(node: Any, table: pd.DataFrame, *, folder: Path, source: Path | None) -> Any:
    """PSI, each network's explanation machines on the aligned rows, then the trees' PSI and prediction round; the
    outcome is ``(aligned rows, each network's PartyExplanation, (the trees' rows, codes, bits))``."""
    nets, ex = node.nets, node.config.explain
    with about_file(source):
        prepared = [p.prepare(table) for p in nets.networks]
    psi = nets.psi_settings("explain", state_dir=folder / "psi-state" / "networks")
    options = {"steps": ex.steps, "chunk": ex.chunk, "share_top_k": ex.share_top_k, "method": ex.method}
    first = yield from explain_session(nets.networks[0], nets.topology, prepared[0], psi=psi, **options)
    results = [first.result]
    for party, inputs in zip(nets.networks[1:], prepared[1:], strict=True):
        more = yield from explain_session(party, nets.topology, inputs, rows=first.rows, **options)
        results.append(more.result)
    state = folder / "psi-state" / node.second
    if node.second == "scorecard":
        tree_part = yield from _points_session(node.trees, table, source=source, state=state)
    else:
        tree_part = yield from _trees_session(node.trees, table, source=source,
                                              psi=node.trees.psi_settings("explain", state_dir=state))
    rows = first.rows if first.rows is not None else np.zeros(0, dtype=np.int64)
    return rows, results, tree_part


def _label_outputs(config: PartyConfig, explanation: Explanation, folder: Path) -> dict[str, Any]:
    ex = config.explain
    binary = config.topology.task == "binary"  # probabilities beside the log-odds, the scale of predictions
    table = explanation.table(id_column=config.data.id_column, probabilities=binary)
    write_atomic(folder / "explanations.csv", table.to_csv(index=False).encode(), within=folder.parent.parent)
    reasons = reason_codes(explanation, n=ex.reasons, texts=ex.texts, decline_when=ex.decline_when,
                           threshold=ex.threshold)
    write_reasons(reasons, folder, within=folder.parent.parent)
    error = explanation.completeness_error()
    _add_to_card(folder.parent.parent, explanation)
    return {
        "method": explanation.method,
        "steps": explanation.steps,
        "note": explanation.note,
        "breakpoints_per_row_mean": None if explanation.knots is None else float(explanation.knots.mean()) - 2,
        "declined": len(reasons),
        "completeness_max_error": float(error.max()) if len(error) else 0.0,
        "completeness_mean_error": float(error.mean()) if len(error) else 0.0,
        "global_importance": {k: float(v) for k, v in explanation.global_importance().items()},
        "partners_sharing_top_k": sorted(explanation.top),
        "files": ["explanations.csv", "reasons.csv", "reasons.json"],
    }


def _bank_only_outputs(config: PartyConfig, node: Any, table: pd.DataFrame, rows: np.ndarray,
                       folder: Path) -> dict[str, Any]:
    """The rows no partner knows, which the bank-only fallback scores: its explanation and reason codes, in
    ``bank_only/`` (:func:`vsplit.app.fallback.explain_bank_only`); nothing without such rows or a fallback model."""
    from vsplit.app.fallback import FILE, explain_bank_only, load_bank_only

    unknown = np.setdiff1d(np.arange(len(table)), rows)
    saved = node.folder / FILE
    if not len(unknown) or not saved.is_file() or node.table is None:
        return {}
    alone = load_bank_only(saved, lambda trained: node._build_party(node.table, trained=trained),
                           run_id=config.output.run_id, party=node.name)
    if alone is None:
        return {}
    ex = config.explain
    explanation = explain_bank_only(alone, table, rows=unknown, steps=ex.steps, method=ex.method)
    out = folder / "bank_only"
    out.mkdir(exist_ok=True)
    frame = explanation.table(id_column=config.data.id_column, probabilities=config.topology.task == "binary")
    write_atomic(out / "explanations.csv", frame.to_csv(index=False).encode(), within=folder.parent.parent)
    reasons = reason_codes(explanation, n=ex.reasons, texts=ex.texts, decline_when=ex.decline_when,
                           threshold=ex.threshold)
    write_reasons(reasons, out, within=folder.parent.parent)
    return {"bank_only": {"rows": len(unknown), "model": alone.chosen, "declined": len(reasons),
                          "files": ["bank_only/explanations.csv", "bank_only/reasons.csv", "bank_only/reasons.json"]}}


def _add_to_card(run_folder: Path, explanation: Explanation) -> None:
    """Add the global importances (and their bar chart) to the model card the label party's training run wrote."""
    from vsplit.report.card import RECORD, write_model_card
    from vsplit.report.card_record import read_card

    record = run_folder / RECORD
    if not record.is_file():
        return
    card = read_card(record)
    card["importance"] = {k: float(v) for k, v in explanation.global_importance().items()}
    card.setdefault("limits", []).append(
        f"Importances from vsplit explain on {len(explanation.ids)} rows ({explanation.method_text()}; largest "
        f"completeness error {float(explanation.completeness_error().max()):.2g} log-odds).")
    write_model_card(run_folder, card)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")
