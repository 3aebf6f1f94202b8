"""A party of a vertical split that trains split networks and boosted trees, combined by the label party
(``[model] kind = "ensemble"``): :class:`~vsplit.ensemble.SplitEnsemble` between organizations.

Theory of operation. :class:`EnsembleNode` holds the two nodes it reuses, each on its own part of the config
(:func:`vsplit.config.ensemble.part_config`) and writing into its own folder of this party's run folder: an
:class:`~vsplit.node.aligned.AlignedNode` (``networks/``: a bag of ``ensemble.networks``) and a
:class:`~vsplit.node.boost.BoostNode` (``trees/``: ``[boosting]``). Its session drives both over the same channels,
as :class:`~vsplit.ensemble.SplitEnsemble` fits in one process:

0. every party checks it shares the settings that shape the stages (:mod:`vsplit.protocol.ensemble`: the bag's
   networks, ``refit``, a fixed weight or not), naming the key that differs;
1. the label party sets aside ``ensemble.weight_fraction`` of its own rows (stratified, drawn with ``train.seed``,
   :func:`vsplit.tune.rows.validation_views`; none with a fixed ``ensemble.weight``);
2. PSI once on the rest, then the networks' training stages and the trees' (both on those aligned rows);
3. both parts score the set-aside rows (each partner from its training table: the same PSI and scoring rounds as a
   test table's) and the label party keeps the weight ``w`` of ``ensemble.weights`` whose combination ``w * mean
   network log-odds + (1 - w) * tree margin`` has the best AUC there: it holds both models' outputs, so nothing new
   crosses the cut and the partners never learn ``w``;
4. with ``ensemble.refit`` both parts train again on every row (a new PSI), the trees as many as were kept, scaled
   by the rows' ratio (:meth:`SplitEnsemble._refit_trees <vsplit.ensemble.SplitEnsemble>`);
5. with a test table, both parts score it and the label party reports the combination's metrics.

``model.npz`` (this folder) says ``kind = "ensemble"`` and, at the label party, the weight; each part keeps its own
``model.npz``. ``vsplit predict`` runs both parts' scoring rounds and combines them. The pump holds a peer's frames
for the stage they belong to (``hold``: a partner done with one stage already sends the next one's). The run keeps
no resumable state: ``--resume`` is refused (every party starts again).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.config import PartyConfig
from vsplit.config.ensemble import part_config, second_kind, weight_grid
from vsplit.errors import CheckpointError, ProtocolError
from vsplit.node.aligned import AlignedNode, NodeResult, psi_summary
from vsplit.node.boost import BoostNode
from vsplit.node.model_file import read_model
from vsplit.node.node import PartyNode
from vsplit.node.outputs import Scores
from vsplit.runtime.checkpoint import interpreting, save_checkpoint
from vsplit.transport.channel import Channel


@dataclass
class EnsembleResult(NodeResult):
    """What one party learned from an ensemble run; the label party: the weight and how it was chosen."""

    weight: float | None = None
    #: label party: each candidate weight's AUC on the set-aside rows, and the networks', trees' and ensemble's AUC
    #: there (with the rows scored)
    weight_scores: list[list[float]] = field(default_factory=list)
    validation_auc: dict[str, float] = field(default_factory=dict)
    #: label party: how the weight was chosen (``ensemble.weight_rule``), or ``"fixed"`` (``ensemble.weight`` set)
    weight_rule: str | None = None
    trees: int = 0
    #: the networks' partner: "trees" or "scorecard"
    second: str = "trees"
    refit: bool = False


@dataclass
class Combined:
    """Both parts' scores of one table: the label party also gets each aligned row's log-odds of each part."""

    table: pd.DataFrame
    ids: np.ndarray
    rows: np.ndarray
    psi: dict[str, Any]
    networks: np.ndarray | None = None
    trees: np.ndarray | None = None


class EnsembleNode(PartyNode, kinds=("ensemble",)):
    """Runs one party of a vertical split with split networks and boosted trees, as configured by ``config``."""

    finishing = "saving its model and writing its result"

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        super().__init__(config, resume=resume, progress=progress)
        self.weight: float | None = config.ensemble.weight
        #: the networks' partner: "trees" or "scorecard" (``ensemble.second``), the folder its part writes
        self.second = "scorecard" if config.ensemble.second == "scorecard" else "trees"
        self.weight_scores: dict[float, float] = {}
        self.validation_auc: dict[str, float] = {}
        self.nets, self.trees = self._parts()

    def _parts(self, table: pd.DataFrame | None = None) -> tuple[AlignedNode, Any]:
        """The two parts' nodes, each in its own folder; ``table``: the label party's rows they train on (default:
        its whole table). The second is a :class:`~vsplit.node.boost.BoostNode` (``trees/``) or, with
        ``ensemble.second = "scorecard"``, a :class:`~vsplit.node.scorecard.ScorecardNode` (``scorecard/``)."""
        from vsplit.node.scorecard import ScorecardNode

        kind = second_kind(self.config)
        nets = AlignedNode(part_config(self.config, "network"), progress=self.progress)
        other = ScorecardNode if kind == "scorecard" else BoostNode
        trees = other(part_config(self.config, kind), progress=self.progress)
        nets.folder, trees.folder = self.folder / "networks", self.folder / self.second
        if table is not None:
            nets.table, trees.table = table, table
            nets.party = nets._build_party(table)
        return nets, trees

    # -- what the program supplies -----------------------------------------------------------------------------------
    @property
    def feature_columns(self) -> list[str]:
        return list(dict.fromkeys([*(self.nets.feature_columns or []), *self.trees.feature_columns]))

    def before_connect(self) -> None:
        if self.resume:
            raise CheckpointError(f"{self.name}: --resume does not resume an ensemble (model.kind = \"ensemble\") yet: "
                                  "start every party again without --resume")
        self.trees.before_connect()  # the homomorphic extra, before any peer is reached

    def pump(self, channels: Mapping[str, Channel], *, purpose: str = "", **options: Any) -> Any:
        """As :meth:`PartyNode.pump`, holding a peer's frames for the stage they belong to (training and scoring: a
        partner done with one stage, a network's last scoring chunk or its last tree, already sends the next
        stage's first frames)."""
        return super().pump(channels, purpose=purpose, **{"hold": True, **options})

    # -- training ----------------------------------------------------------------------------------------------------
    def session(self) -> Any:
        """PSI and both parts' training on the label party's rows not set aside, the weight, (``refit``) both parts
        again on every row, and (if configured) the test table's scoring; its outcome is ``(alignment, scored test
        table or None)``."""
        e = self.config.ensemble
        yield "ensemble", self._agreement()
        backend = self.nets.open_psi_backend()
        try:
            if self.weight is None:  # the label party sets rows aside; a partner trains on its whole table
                fit, held = self._set_aside()
                if fit is not None:
                    self.nets, self.trees = self._parts(fit)
                alignment, first = yield from self._train(backend)
                self.weight = yield from self._choose_weight(held, backend)
                if e.refit:
                    kept = len(self.trees.model.trees) if self.role == "label" and self.second == "trees" else 0
                    self.nets, self.trees = self._parts()
                    if self.second == "trees":
                        self._refit_trees(kept)
                    alignment, first = yield from self._train(backend, again=True)
            else:
                alignment, first = yield from self._train(backend)
            self.save_model()
            scored = None
            if first.extra["machine"].plan.then_score:  # the label party has a test table: every party scores it
                test, source = self.nets._test_table_to_score()
                scored = yield from self.score_session(test, source=source, psi_stage="test psi", backend=backend)
            return alignment, scored
        finally:
            if backend is not None:
                backend.close()

    def _agreement(self) -> Any:
        """The machine by which every party checks it shares the settings that shape the run's stages
        (:mod:`vsplit.protocol.ensemble`)."""
        from vsplit.protocol.ensemble import SECONDS, EnsembleSettings, LabelAgree, PartnerAgree

        e = self.config.ensemble
        fixed = e.weight is not None  # a fixed weight: no refit, whatever ensemble.refit says
        mine = EnsembleSettings(networks=e.networks, refit=int(e.refit and not fixed), fixed=int(fixed),
                                second=SECONDS.index(self.second))
        if self.role == "label":
            return LabelAgree(mine, partners=list(self.config.network.peers))
        return PartnerAgree(mine, label=self.trees.hub)

    def _set_aside(self) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
        """The label party's rows to train on and those set aside to choose the weight (a partner: ``None``s), as
        :class:`~vsplit.ensemble.SplitEnsemble` draws them."""
        if self.role != "label":
            return None, None
        from vsplit.models.seeds import derive_seed
        from vsplit.tune.rows import validation_views

        d = self.config.data
        assert d.label is not None
        fit, held = validation_views({self.name: self.trees.table}, label_party=self.name, label=d.label,
                                     fraction=self.config.ensemble.weight_fraction,
                                     seed=derive_seed(self.config.train.seed, "ensemble", "weight") % 2**31)
        return fit[self.name], held[self.name]

    def _train(self, backend: Any, *, again: bool = False) -> Any:
        """PSI once, then the networks' and the trees' training stages on the aligned rows (each part saves its own
        ``model.npz``); ``(alignment, the first network's training outcome)``. ``again``: the refit (its PSI keeps
        its resumable progress apart from the first one's, on other rows)."""
        from vsplit.app.session import psi_machine
        from vsplit.psi.alignment import canonical_rows

        nets, trees = self.nets, self.trees
        nets._psi_backend = trees._psi_backend = backend
        ids = trees.table[self.config.data.id_column]
        state = self.folder / "psi-state" / ("refit" if again else "train")
        alignment = yield "psi", psi_machine(self.name, trees.topology, ids, nets.psi_settings(state_dir=state))
        rows = canonical_rows(alignment)
        first = yield from nets.train_networks(rows)
        yield from trees.train_stages(rows)
        return alignment, first

    def _refit_trees(self, kept: int) -> None:
        """(label party) The refit's trees: every row, no early stopping, the ``kept`` trees scaled by the rows'
        ratio, as :class:`~vsplit.ensemble.SplitEnsemble` refits (a partner follows the label party's count)."""
        from vsplit.config.boosting import boost_params

        b, rows = self.config.boosting, 1 - self.config.ensemble.weight_fraction
        if b.early_stopping_rounds:
            rows *= 1 - self.config.train.validation_fraction
        boosting = dataclasses.replace(b, trees=max(1, round(kept / rows)) if kept else b.trees,
                                       early_stopping_rounds=0)
        self.trees.config = dataclasses.replace(self.trees.config, boosting=boosting)
        self.trees.params = boost_params(self.trees.config)

    def _choose_weight(self, held: pd.DataFrame | None, backend: Any) -> Any:
        """Both parts score the set-aside rows (a partner: from its training table); the label party returns the
        weight of the best AUC there (a partner: ``None``)."""
        from sklearn.metrics import roc_auc_score

        from vsplit.ensemble import choose_weight, weight_seed

        table = held if held is not None else self.trees.table
        scored = yield from self.score_session(table, psi_stage="weight psi", backend=backend,
                                               psi_state=self.folder / "psi-state" / "weight")
        if self.role != "label":
            return None
        assert scored.networks is not None and scored.trees is not None
        y = self.trees._labels(scored.table.iloc[scored.rows])
        weight, scores = choose_weight(y, scored.networks, scored.trees, weight_grid(self.config),
                                       rule=self.config.ensemble.weight_rule, seed=weight_seed(self.config.train.seed))
        self.weight_scores = scores
        combined = weight * scored.networks + (1 - weight) * scored.trees
        self.validation_auc = {"networks": float(roc_auc_score(y, scored.networks)),
                               self.second: float(roc_auc_score(y, scored.trees)),
                               "ensemble": float(roc_auc_score(y, combined)), "rows": len(y)}
        return weight

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score_session(self, table: pd.DataFrame, *, psi_state: Path | None = None, source: Path | None = None,
                      psi_stage: str = "psi", backend: Any = None) -> Any:
        """Both parts score ``table``'s customers in turn (each its own PSI and rounds, as each alone does); the label
        party gets each part's log-odds of the customers every party knows (:class:`Combined`)."""
        from vsplit.ensemble import log_odds

        if backend is not None:
            self.nets._psi_backend = self.trees._psi_backend = backend
        nets = yield from self.nets.score_session(table, source=source, psi_stage=psi_stage,
                                                  psi_state=psi_state / "networks" if psi_state else None)
        trees = yield from self.trees.score_session(table, source=source, psi_stage=psi_stage,
                                                    psi_state=psi_state / "trees" if psi_state else None)
        if not np.array_equal(nets.rows, trees.rows):
            raise ProtocolError(f"{self.name}: the networks and the trees aligned other customers of the same table")
        out = Combined(table=table, ids=np.asarray(nets.ids), rows=nets.rows, psi=nets.psi)
        if self.role == "label":
            assert nets.each is not None
            out.networks = np.mean([log_odds(p) for p in nets.each], axis=0)
            out.trees = log_odds(np.asarray(trees.proba))
        return out

    def combine(self, scored: Combined) -> np.ndarray:
        """(label party) The ensemble's probabilities of ``scored``'s aligned rows."""
        assert self.weight is not None and scored.networks is not None and scored.trees is not None
        z = self.weight * scored.networks + (1 - self.weight) * scored.trees
        return 1 / (1 + np.exp(-z))

    def score_table(self, table: pd.DataFrame | None, *, channels: Mapping[str, Channel] | None = None,
                    peers: list[str] | None = None, psi_state: Path | None = None,
                    source: Path | None = None) -> Scores:
        """Score ``table``'s customers with both saved parts (``vsplit predict``); the label party gets the
        combination."""
        assert table is not None
        started = time.perf_counter()
        scored, communication = self.exchange(self.score_session(table, psi_state=psi_state, source=source),
                                              channels=channels, peers=peers)
        out = Scores(seconds={"predict": round(time.perf_counter() - started, 3)}, communication=communication,
                     summary={"psi": scored.psi, "model": "ensemble"})
        if self.role == "label":
            out.ids = [str(v) for v in scored.ids]
            proba = self.combine(scored)
            out.by_id = dict(zip([out.ids[r] for r in scored.rows], proba.tolist(), strict=True))
            out.fallback = self.nets.fallback_scores(table, out.by_id)  # the bank's own model, where it trained one
        return out

    def _write_card(self, result: EnsembleResult, scored: Combined | None) -> None:
        from vsplit.explain.ensemble_card import ensemble_card
        from vsplit.report.card import write_model_card

        y = self.trees._labels(scored.table.iloc[scored.rows]) if scored is not None else None
        write_model_card(self.folder, ensemble_card(self, result, scored, y))

    def _write_report(self, result: EnsembleResult, scored: Combined | None) -> Path:
        """``report.json`` and ``report.md`` (:mod:`vsplit.node.ensemble_report`): the label party's full one with a
        test table, else this party's own."""
        from vsplit.node.ensemble_report import write_ensemble_report

        y = None
        if self.role == "label" and scored is not None:
            y = self.trees._labels(scored.table.iloc[scored.rows])
        return write_ensemble_report(self, result, scored, y)

    # -- the model file ----------------------------------------------------------------------------------------------
    def save_model(self) -> Path:
        """``model.npz``: what this run is (``kind = "ensemble"``, its networks, whether it refitted) and, at the label
        party, the weight; each part keeps its own ``model.npz`` (``networks/``, ``trees/``)."""
        e = self.config.ensemble
        state: dict[str, Any] = {"party": self.name, "role": self.role, "kind": "ensemble", "networks": e.networks,
                                 "parts": ["networks", self.second], "refit": bool(e.refit and e.weight is None)}
        if self.role == "label":
            assert self.weight is not None
            state.update(weight=float(self.weight), fixed=e.weight is not None,
                         weight_scores=[[float(w), float(a)] for w, a in sorted(self.weight_scores.items())],
                         validation_auc=dict(self.validation_auc))
        path = self.folder / "model.npz"
        save_checkpoint(path, state, run_id=self.config.output.run_id, party=self.name)
        return path

    def load_model(self) -> None:
        """This party's ``model.npz`` (the label party: the weight), then each part's."""
        path, state = read_model(self.folder, run_id=self.config.output.run_id, party=self.name, role=self.role,
                                 kind="ensemble", what="ensemble")
        with interpreting(path):
            if int(state["networks"]) != self.config.ensemble.networks:
                raise CheckpointError(f"{path} holds {state['networks']} networks, ensemble.networks is "
                                      f"{self.config.ensemble.networks}; predict with the config it was trained with")
            saved = str(list(state.get("parts", ["networks", "trees"]))[-1])
            if saved != self.second:
                raise CheckpointError(f"{path} holds networks and {saved}, ensemble.second is {self.second!r}; predict "
                                      "with the config it was trained with")
            if self.role == "label":
                self.weight = float(state["weight"])
                self.weight_scores = {float(w): float(a) for w, a in state.get("weight_scores", [])}
                self.validation_auc = dict(state.get("validation_auc", {}))
        self.nets.load_model()
        self.trees.load_model()

    # -- outputs -----------------------------------------------------------------------------------------------------
    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> EnsembleResult:
        """This party's result (the label party: the weight and, with a test table, the combination's metrics) and
        result.json."""
        alignment, scored = outcome
        seconds = dict(seconds)
        e = self.config.ensemble
        result = EnsembleResult(party=self.name, role=self.role, psi={"train": psi_summary(alignment)}, comm=comm,
                                trees=getattr(self.trees, "trees_done", 0), second=self.second,
                                refit=bool(e.refit and e.weight is None),
                                seconds={k: round(v, 3) for k, v in seconds.items()})
        if self.role == "label":
            trained = [out.result for out in self.nets._trained]  # the networks' (the refit's, with refit)
            if trained:
                result.history, result.best_epoch = trained[0].history, trained[0].best_epoch
            if len(trained) > 1:
                result.networks = [{"network": i, "best_epoch": r.best_epoch, "epochs_run": len(r.history)}
                                   for i, r in enumerate(trained)]
            result.weight = self.weight
            result.weight_scores = [[w, a] for w, a in sorted(self.weight_scores.items())]
            result.validation_auc = dict(self.validation_auc)
            result.weight_rule = "fixed" if e.weight is not None else e.weight_rule
            # networks/fallback.npz: the bank's own model, for the customers a partner does not know (as a network
            # run's); after the session, so that no partner waits for it
            self.nets.bank_only = self.nets.train_fallback()
        if scored is not None:
            result.psi["test"] = scored.psi
            if self.role == "label":
                from sklearn.metrics import roc_auc_score

                from vsplit.metrics import binary_metrics

                y = self.trees._labels(scored.table.iloc[scored.rows])
                result.test = {**binary_metrics(y, self.combine(scored)), "n_scored": len(scored.rows)}
                if len(set(y)) == 2:
                    result.test.update({"networks_auc": float(roc_auc_score(y, scored.networks)),
                                        f"{self.second}_auc": float(roc_auc_score(y, scored.trees))})
                if self.nets.bank_only is not None:  # the bank alone on the test table: coverage and baseline
                    from vsplit.app.fallback import cover_test

                    self.nets.coverage = cover_test(self.nets.bank_only, scored.table, scored.rows,
                                                    self.combine(scored))
                    if self.config.output.baselines:
                        alone = self.nets.label_party_only(scored.table, scored.rows)
                        if alone is not None:
                            result.baselines = {"label_party_only": alone}
        self.write_json("result.json", result.__dict__)
        self._write_report(result, scored)
        if self.role == "label":  # model_card.md, .html and .json: both parts, the weight, what crosses
            self._write_card(result, scored)
        AlignedNode._record_for_serving(self, alignment)  # type: ignore[arg-type]  # peers.json, the intersection
        for folder in (self.folder, self.nets.folder, self.trees.folder):  # the run succeeded: no PSI progress kept
            shutil.rmtree(folder / "psi-state", ignore_errors=True)
        shutil.rmtree(self.trees.folder / "checkpoints", ignore_errors=True)  # nothing resumes an ensemble
        return result
