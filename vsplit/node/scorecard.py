"""A party of a vertical split that trains a scorecard (``[model] kind = "scorecard"``).

Theory of operation. :class:`ScorecardNode` reads the party's own table, aligns the customers with the peers by PSI
(:class:`~vsplit.node.aligned.AlignedNode`'s settings), bins its own attributes across the cut with the machines of
:mod:`vsplit.woe` (as ``vsplit bin`` does, :class:`~vsplit.node.woe.WoeNode`), keeps the attributes its ``[woe]``
selection names (``select_min_iv``, ``select_top_k``; each party selects its own), and trains the logistic regression
of :mod:`vsplit.scorecard` on their WOE over the same pump: every stage in one session over mutual TLS. ``model.npz``:
this party's WOE maps of the selected attributes, its coefficients (the label party: and the intercept, the points
scale and the partners' model-card entries), never a peer's. The label party writes ``scorecard.md`` (its points
table and what each partner shares). Scoring (the test table after training, ``vsplit predict``): PSI, then one
round in which each partner answers one number per row, its points (and its reason codes);
the label party writes ``points.csv`` (score, each party's points, reason codes) beside ``predictions.csv``.
The run keeps no checkpoint: a run is binning plus ``scorecard.iterations`` steps, and a failed one is run again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.config import PartyConfig
from vsplit.config.boosting import small_keys_allowed
from vsplit.config.scorecard import scorecard_params
from vsplit.errors import ConfigError
from vsplit.node.aligned import AlignedNode, NodeResult, Scored, psi_summary
from vsplit.node.boost import BoostNode
from vsplit.node.model_file import read_model
from vsplit.node.outputs import Scores
from vsplit.node.own_table import OwnTableNode
from vsplit.node.woe import WoeNode
from vsplit.runtime.checkpoint import interpreting, save_checkpoint
from vsplit.transport.channel import Channel


@dataclass
class ScorecardResult(NodeResult):
    """What one party learned from a scorecard run: its selected attributes, and (label party) the test Gini."""

    attributes: list[str] = field(default_factory=list)
    iterations: int = 0


class ScorecardNode(OwnTableNode, kinds=("scorecard",)):
    """Runs one party of a vertical split with a scorecard, as configured by ``config``."""

    needs_he = 'model.kind = "scorecard"'
    model_kind = "scorecard"
    forget_psi_progress = AlignedNode.forget_psi_progress
    _labels = BoostNode._labels
    _woe_machine = WoeNode._machine
    _backend = WoeNode._backend

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        super().__init__(config, resume=resume, progress=progress)
        self.params, self.scaling = scorecard_params(config)
        self.maps: list[Any] = []
        self.coef = np.zeros(0)
        self.intercept = 0.0
        self.cards: dict[str, Any] = {}
        self.iv: dict[str, float] = {}

    def pump_options(self) -> dict[str, Any]:
        """A partner whose card is in moves on to the test table's PSI while others still send theirs: its frames wait
        for the stage they belong to (``hold``)."""
        return {"hold": True}

    def _key_options(self) -> dict[str, Any]:
        s = self.config.scorecard
        return {"insecure_small_key_for_tests": small_keys_allowed()} | (
            {"scheme": s.scheme, "key_bits": s.key_bits} if self.role == "label"
            else {"schemes": ("ou", "paillier"), "min_key_bits": s.key_bits})

    # -- training ----------------------------------------------------------------------------------------------------
    def session(self) -> Any:
        """PSI, binning, selection, the scorecard, then (if configured) the test table's PSI and scoring; its outcome
        is ``(alignment, scored test table or None)``."""
        from vsplit.app.session import psi_machine
        from vsplit.psi.alignment import canonical_rows

        self._psi_backend = self.open_psi_backend()
        try:
            ids = self.table[self.config.data.id_column]
            alignment = yield "psi", psi_machine(self.name, self.topology, ids, self.psi_settings())
            yield from self.train_stages(canonical_rows(alignment))
            scored = yield from self.then_score()
            return alignment, scored
        finally:
            if self._psi_backend is not None:
                self._psi_backend.close()
                self._psi_backend = None

    def train_stages(self, rows: np.ndarray) -> Any:
        """The stages after the alignment (``rows``: this party's aligned rows, in the agreed order): binning across
        the cut, this party's selection, the scorecard; then ``model.npz`` (also run by the ensemble's node,
        :mod:`vsplit.node.ensemble`, with ``ensemble.second = "scorecard"``)."""
        backend = self._backend()
        try:
            binned = yield "bin", self._woe_machine(rows, backend)
        finally:
            backend.close()
        binning = binned.own if self.role == "label" else binned
        w = self.config.woe
        selected = binning.select(min_iv=w.select_min_iv, top_k=w.select_top_k)
        if not selected and self.role != "label":
            raise ConfigError(f"{self.name}: [woe] select_min_iv = {w.select_min_iv} keeps none of this party's "
                              "attributes; lower it")
        by_name = {m.name: m for m in binning.maps}
        self.maps, self.iv = [by_name[a] for a in selected], dict(binning.iv)
        columns = self._columns(self.table.iloc[rows].reset_index(drop=True))
        trained = yield "train", self._train_machine(columns, rows)
        self._take(trained)
        self.save_model()

    def _columns(self, table: pd.DataFrame) -> Any:
        from vsplit.scorecard import columns_from_maps

        return columns_from_maps(self.maps, table)

    def _train_machine(self, columns: Any, rows: np.ndarray) -> Any:
        from vsplit.scorecard import LabelScorecard, PartnerScorecard

        if self.role == "label":
            labels = self._labels(self.table.iloc[rows])
            self._machine: Any = LabelScorecard(columns.matrix(), labels=labels, partners=self.partners,
                                                params=self.params, scaling=self.scaling, **self._key_options())
        else:
            s = self.config.scorecard
            self._machine = PartnerScorecard(columns, label=self.hub, share_names=s.share_names,
                                             share_points=s.share_points, **self._key_options())
        if self.console is not None:  # it reads the step when it samples; the machines keep no loss to show
            machine, steps = self._machine, self.params.iterations
            self.console.watch_progress(lambda: {"unit": "steps", "done": machine.step, "total": steps})
        return self._machine

    def _take(self, trained: Any) -> None:
        if self.role == "label":
            self.coef, self.intercept = np.asarray(trained[0]), float(trained[1])
            self.cards = dict(self._machine.cards)
        else:
            self.coef = np.asarray(trained)
            self.scaling = self._machine.scaling  # the label party's scale

    # -- the model file ----------------------------------------------------------------------------------------------
    def points_table(self) -> Any:
        """This party's points table (:class:`~vsplit.scorecard.PointsTable`)."""
        from vsplit.scorecard import PointsTable
        from vsplit.scorecard.columns import map_tables

        names, woe, labels = map_tables(self.maps)
        return PointsTable.of(names=names, labels=labels, woe=woe, coef=self.coef, scaling=self.scaling)

    def save_model(self) -> Path:
        """``model.npz``: this party's selected WOE maps and coefficients (the label party: intercept, scale, the
        partners' model-card entries)."""
        s = self.scaling
        state: dict[str, Any] = {"party": self.name, "role": self.role, "kind": "scorecard",
                                 "maps": [m.state() for m in self.maps], "coef": np.asarray(self.coef, np.float64),
                                 "scaling": [s.base_score, s.base_odds, s.pdo]}
        if self.role == "label":
            import json

            state.update(partners=self.partners, intercept=self.intercept, cards=json.dumps(self.cards))
        path = self.folder / "model.npz"
        save_checkpoint(path, state, run_id=self.config.output.run_id, party=self.name)
        return path

    def load_model(self) -> None:
        """This party's ``model.npz``."""
        import json

        from vsplit.scorecard import Scaling
        from vsplit.woe.maps import WoeMap

        path, state = read_model(self.folder, run_id=self.config.output.run_id, party=self.name, role=self.role,
                                 kind="scorecard", what="scorecard")
        with interpreting(path):
            self.maps = [WoeMap.from_state(m) for m in state["maps"]]
            self.coef = np.asarray(state["coef"], dtype=np.float64)
            base_score, base_odds, pdo = (float(v) for v in state["scaling"])
            self.scaling = Scaling(base_score=base_score, base_odds=base_odds, pdo=pdo)
            if self.role == "label":
                self.partners = list(state["partners"])
                self.intercept = float(state["intercept"])
                self.cards = json.loads(str(state["cards"]))

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score_session(self, table: pd.DataFrame, *, psi_state: Path | None = None, source: Path | None = None,
                      psi_stage: str = "psi") -> Any:
        """Align ``table``'s customers by PSI, then one round: each partner's points per row."""
        from vsplit.app.session import psi_machine
        from vsplit.data.sources import about_file
        from vsplit.psi.alignment import canonical_rows
        from vsplit.scorecard import LabelPoints, PartnerPointsMachine

        d = self.config.data
        alignment = yield psi_stage, psi_machine(self.name, self.topology, table[d.id_column],
                                                 self.psi_settings("test", state_dir=psi_state))
        rows = canonical_rows(alignment)
        with about_file(source):
            columns = self._columns(table.iloc[rows].reset_index(drop=True))
        table_points = self.points_table()
        if self.role == "label":
            machine: Any = LabelPoints(table_points, own_codes=columns.codes,
                                       base_points=self.scaling.base_points(self.intercept), partners=self.partners,
                                       reasons=self.config.scorecard.reasons, name=self.name)
        else:
            s = self.config.scorecard
            machine = PartnerPointsMachine(table_points, codes=columns.codes, label=self.hub, share_reasons=True,
                                           share_names=s.share_names)
        points = yield "score", machine
        ids = table[d.id_column].to_numpy()
        proba = None
        if self.role == "label":
            from vsplit.scorecard import sigmoid

            proba = sigmoid(self.scaling.log_odds(points.score))
            self._points = (ids[rows], points)
        return Scored(table=table, ids=ids, rows=rows, proba=proba, psi=psi_summary(alignment))

    def score_table(self, table: pd.DataFrame | None, *, channels: Mapping[str, Channel] | None = None,
                    peers: list[str] | None = None, psi_state: Path | None = None,
                    source: Path | None = None) -> Scores:
        """Score ``table``'s customers with the saved scorecard (``vsplit predict``); the label party gets the
        probabilities and writes ``points.csv`` (beside ``predictions.csv``)."""
        out = super().score_table(table, channels=channels, peers=peers, psi_state=psi_state, source=source)
        if self.role == "label":
            folder = psi_state.parent if psi_state is not None else self.folder
            out.summary["points"] = self._write_points(folder).name
        return out

    def _write_points(self, folder: Path) -> Path:
        """``points.csv``: per scored customer the score, each party's points and the reason codes."""
        from vsplit.atomic import write_atomic

        ids, points = self._points
        frame = pd.DataFrame({self.config.data.id_column: [str(i) for i in ids], "score": points.score})
        for party, values in points.by_party.items():
            frame[f"points_{party}"] = values
        if points.reasons:
            frame["reasons"] = ["; ".join(f"{p}:{a} (-{c:.1f})" for p, a, c in row) for row in points.reasons]
        path = folder / "points.csv"
        write_atomic(path, frame.to_csv(index=False).encode(), within=self.folder)
        return path

    # -- outputs -----------------------------------------------------------------------------------------------------
    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> ScorecardResult:
        """This party's result (the label party: test AUC and Gini), result.json and, at the label party, the
        model-card section ``scorecard.md``."""
        alignment, scored = outcome
        seconds = dict(seconds)
        if "score" in seconds or "test psi" in seconds:  # the word that scoring follows, its PSI and its round
            seconds["score"] = (seconds.pop("then score", 0.0) + seconds.pop("test psi", 0.0)
                                + seconds.pop("score", 0.0))
        result = ScorecardResult(party=self.name, role=self.role, psi={"train": psi_summary(alignment)}, comm=comm,
                                 attributes=[m.name for m in self.maps], iterations=self.params.iterations,
                                 seconds={k: round(v, 3) for k, v in seconds.items()})
        if scored is not None:
            result.psi["test"] = scored.psi
            if self.role == "label":
                from sklearn.metrics import roc_auc_score

                y = self._labels(scored.table.iloc[scored.rows])
                auc = float(roc_auc_score(y, scored.proba)) if len(set(y)) == 2 else None
                result.test = {"auc": auc, "gini": None if auc is None else 2 * auc - 1, "n_scored": len(scored.rows)}
        self.write_json("result.json", result.__dict__)
        if self.role == "label":
            from vsplit.atomic import write_atomic
            from vsplit.scorecard.card import card_markdown

            text = card_markdown(self.points_table(), base_points=self.scaling.base_points(self.intercept),
                                 scaling=self.scaling, cards=self.cards, name=self.name)
            write_atomic(self.folder / "scorecard.md", (text + "\n").encode(), within=self.folder)
        self.forget_psi_progress()
        return result
