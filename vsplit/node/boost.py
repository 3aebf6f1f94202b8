"""A party of a vertical split that trains gradient-boosted trees (``[model] kind = "boosting"``).

Theory of operation. :class:`BoostNode` is the node of :mod:`vsplit.node.aligned` with trees instead of networks:
it reads the party's own table, aligns the customers with the peers by the same PSI (its settings, backend and
resumable progress are :class:`~vsplit.node.aligned.AlignedNode`'s), then bins its own columns on the aligned rows
(the edges never leave it, :mod:`vsplit.boosting.bins`) and runs the machines of :mod:`vsplit.boosting` over the
same pump: first the agreement on where to start (:mod:`vsplit.boosting.resume`), then the trees. Every finished
tree is a checkpoint (the label party: its trees and margins; a partner: its records), so ``--resume`` continues
from the newest tree every party finished and grows the same trees an uninterrupted run grows. The label party makes
a new key pair per session and keeps no secret key at rest; a resumed session re-encrypts the gradients under its new
key. ``model.npz``: the label party's trees as arrays with the party owning each split; a partner's records and its
bins (never sent). Scoring (the test table after training, ``vsplit predict``): PSI, then one round per partner.

What it keeps, as arrays: :mod:`vsplit.node.boost_state`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.config import PartyConfig
from vsplit.config.boosting import boost_params, small_keys_allowed
from vsplit.errors import CheckpointError, ConfigError
from vsplit.node.aligned import AlignedNode, NodeResult, Scored, psi_summary
from vsplit.node.boost_state import Encoder, bins_from, bins_state, holdout_mask, trees_from, trees_state
from vsplit.node.model_file import read_model
from vsplit.node.own_table import OwnTableNode
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, save_checkpoint

log = logging.getLogger(__name__)


@dataclass
class BoostResult(NodeResult):
    """What one party learned from a boosting run: trees trained, and where this session started."""

    trees: int = 0
    resumed_from: int = 0
    #: label party: the trees the model keeps (early stopping keeps the best prefix), and the held-out log loss
    #: of every prefix of the trees trained
    kept_trees: int | None = None
    validation_losses: list[float] = field(default_factory=list)
    #: seconds of this party's own work during training (``encryption``, ``decryption``, ``histograms``: see the
    #: machines' ``seconds``; ``checkpoints``: writing a checkpoint per tree; ``cpu``: this process's CPU time, all
    #: its threads, while it trained)
    work_seconds: dict[str, float] = field(default_factory=dict)


class BoostNode(OwnTableNode, kinds=("boosting",)):
    """Runs one party of a vertical split with boosted trees, as configured by ``config``."""

    needs_he = 'model.kind = "boosting"'
    model_kind = "boosting"
    forget_psi_progress = AlignedNode.forget_psi_progress
    _record_for_serving = AlignedNode._record_for_serving
    config_hash = AlignedNode.config_hash

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        super().__init__(config, resume=resume, progress=progress)
        self.params = boost_params(config)
        self.encoder: Encoder | None = None
        self.bins: Any = None
        self.model: Any = None  # BoostModel (label party) or PartnerModel
        self._resumed_from = 0
        self._held = 0
        self.trees_done = 0
        self.losses: list[float] = []
        self.work_seconds: dict[str, float] = {}

    # -- what the program supplies -----------------------------------------------------------------------------------
    def before_connect(self) -> None:
        super().before_connect()  # the homomorphic extra
        self._held = self._newest_tree()  # a bad --resume fails before any peer is reached

    def session(self) -> Any:
        """PSI, the agreement on where to start, the trees, and (if configured) the test table's PSI and scoring;
        its outcome is ``(alignment, scored test table or None)``."""
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
        """The stages after the alignment (``rows``: this party's aligned rows, in the agreed order): the bins, the
        agreement on where to start, the trees; then ``model.npz`` (also run by the ensemble's node,
        :mod:`vsplit.node.ensemble`)."""
        from vsplit.boosting import fit_bins

        self.encoder = Encoder.fit(self.table[self.feature_columns], categorical=self.config.data.categorical)
        values = self.encoder.transform(self.table.iloc[rows][self.feature_columns])
        self.bins = fit_bins(values, categorical=self.encoder.categorical, max_bins=self.config.boosting.max_bins)
        codes = self.bins.transform(values)
        start, over, holdout = yield "resume", self._resume_machine(len(rows))
        self._resumed_from = start
        saved = self._restore(start)
        self.trees_done = start
        if over:
            self.model = self._model_from(saved)
            ranks = _saved_ranks(saved)
        else:
            training = self._train_machine(codes, rows, saved, holdout=holdout)
            cpu = time.process_time()
            self.model = yield "train", training
            cpu = time.process_time() - cpu
            self.trees_done = training.trees
            self.losses = list(getattr(training.machine, "losses", []))
            self.work_seconds = {**training.inner.seconds, "checkpoints": training.seconds, "cpu": cpu}
            ranks = training.inner.ranks
        self.bins = self.bins.ranked(ranks)  # the first tree's renumbering of the categorical codes, if any
        self.save_model()

    # -- training ----------------------------------------------------------------------------------------------------
    def _resume_machine(self, rows: int) -> Any:
        from vsplit.boosting.resume import LabelResume, PartnerResume

        if self.role == "label":
            holdout = holdout_mask(rows, fraction=self.config.train.validation_fraction, seed=self.config.train.seed) \
                if self.config.boosting.early_stopping_rounds else None
            return LabelResume(held=self._held, partners=self.partners, trees=self.params.trees, holdout=holdout)
        return PartnerResume(held=self._held, label=self.hub)

    def _key_options(self) -> dict[str, Any]:
        b = self.config.boosting
        return {"insecure_small_key_for_tests": small_keys_allowed()} | (
            {"scheme": b.scheme, "key_bits": b.key_bits} if self.role == "label"
            else {"schemes": ("ou", "paillier"), "min_key_bits": b.key_bits})

    def _train_machine(self, codes: np.ndarray, rows: np.ndarray, saved: Mapping[str, Any] | None, *,
                       holdout: np.ndarray) -> Any:
        """The training machine over the rows not held out (``holdout``: 1 per held-out aligned row, or empty),
        restored from ``saved``, stopped early on the held-out rows if any, checkpointed per tree."""
        from vsplit.boosting import LabelBoost, PartnerBoost
        from vsplit.boosting.early import StoppingLabel, StoppingPartner

        held = np.asarray(holdout, dtype=bool) if len(holdout) else np.zeros(len(rows), dtype=bool)
        if len(held) != len(rows):
            raise ConfigError(f"{self.name}: the label party holds out rows of {len(held)} aligned customers, this "
                              f"party has {len(rows)}")
        if self.role == "label":
            labels = self._labels(self.table.iloc[rows])
            machine = LabelBoost(codes[~held], width=self.bins.width, labels=labels[~held], partners=self.partners,
                                 params=self.params, categorical=self.bins.categorical, **self._key_options())
            if saved is not None:  # the trees every party finished, the margins they left, the codes' order
                machine.restore(trees=trees_from(saved), margin=saved["margin"], ranks=_saved_ranks(saved))
            outer: Any = StoppingLabel(machine, own_codes=codes[held], labels=labels[held],
                                       rounds=self.config.boosting.early_stopping_rounds) if held.any() else machine
            return self._watched(TreeCheckpoints(outer, count=lambda m: len(m.trees), save=self._save_label,
                                                 inner=machine))
        machine = PartnerBoost(codes[~held], width=self.bins.width, label=self.hub,
                               min_node_rows=self.config.boosting.min_node_rows, categorical=self.bins.categorical,
                               **self._key_options())
        if saved is not None:  # the trees every party finished, the splits this party recorded, its codes' order
            machine.restore(trees=int(saved["trees"]), records=saved["records"], ranks=_saved_ranks(saved))
        outer = StoppingPartner(machine, codes=codes[held]) if held.any() else machine
        return self._watched(TreeCheckpoints(outer, count=lambda m: m.trees_done, save=self._save_partner,
                                             inner=machine))

    def _watched(self, training: TreeCheckpoints) -> TreeCheckpoints:
        """``training``, handed to the console if one watches this run: it reads the trees done and (label party,
        rows held out) the held-out log loss per tree when it samples; nothing is added per message."""
        if self.console is not None:
            trees = self.params.trees
            self.console.watch_progress(lambda: training.progress(total=trees))
        return training

    def _labels(self, table: pd.DataFrame) -> np.ndarray:
        d = self.config.data
        y = table[d.label]
        if d.positive_label is not None:
            return (y.astype(str) == str(d.positive_label)).to_numpy(dtype=np.float64)
        values = pd.to_numeric(y, errors="coerce").to_numpy(dtype=np.float64)
        if not np.isin(values, (0.0, 1.0)).all():
            raise ConfigError(f"data.label: column {d.label!r} must hold 0/1, or set data.positive_label")
        return values

    def _save_label(self, machine: Any) -> None:
        widths = [machine.width, *(machine.shapes[p][1] for p in self.partners)]
        self._checkpoint(len(machine.trees), {"trees": len(machine.trees), "margin": machine.margin,
                                              "base": machine.base, "widths": widths, **trees_state(machine.trees)},
                         ranks=machine.ranks)

    def _save_partner(self, machine: Any) -> None:
        trees = machine.trees_done
        self._checkpoint(trees, {"trees": trees, "records": machine.records}, ranks=machine.ranks)

    def _checkpoint(self, trees: int, state: dict[str, Any], *, ranks: np.ndarray | None) -> None:
        state = {**state, "bins": bins_state(self.bins.ranked(ranks))}
        save_checkpoint(self.checkpoint_path("tree", trees), state, run_id=self.config.output.run_id, party=self.name)
        # the last three: a partner learns a tree is finished one message after the label party does
        for old in sorted((self.folder / "checkpoints").glob("tree-*.npz"))[:-3]:
            old.unlink()

    def _newest_tree(self) -> int:
        def restore(trees: int) -> dict[str, Any]:
            return load_checkpoint(self.checkpoint_path("tree", trees), run_id=self.config.output.run_id,
                                   party=self.name)

        return max(self.newest_checkpoint("tree", restore, required=False), 0)  # none: this party holds 0 trees

    def _restore(self, trees: int) -> dict[str, Any] | None:
        """The checkpoint of ``trees`` finished trees (``None`` for 0), checked to have the bins of these rows."""
        if trees == 0:
            return None
        path = self.checkpoint_path("tree", trees)
        if not path.is_file():
            raise CheckpointError(f"{self.name}: --resume needs {path.name}, which is gone; start every party "
                                  "without --resume")
        saved = load_checkpoint(path, run_id=self.config.output.run_id, party=self.name)
        with interpreting(path):
            same = bins_state(self.bins)
            if saved["bins"]["max_bins"] != same["max_bins"] or any(
                    not np.array_equal(a, b) for a, b in zip(saved["bins"]["cuts"], same["cuts"], strict=True)):
                raise CheckpointError(f"{path}: binned on other rows or settings than this run; start every party "
                                      "without --resume")
        return saved

    def _model_from(self, saved: Mapping[str, Any] | None) -> Any:
        """The model of a run whose every tree was finished before this session."""
        from vsplit.boosting import BoostModel, PartnerModel

        assert saved is not None
        if self.role == "label":
            return BoostModel(trees=tuple(trees_from(saved)), base=float(saved["base"]),
                              widths=tuple(int(w) for w in saved["widths"]))
        records = np.asarray(saved["records"], dtype=np.int64).reshape(-1, 3)
        return PartnerModel(columns=records[:, 0], bins=records[:, 1], missing_left=records[:, 2].astype(np.uint8),
                            width=self.bins.width)

    # -- the model file ----------------------------------------------------------------------------------------------
    def save_model(self) -> Path:
        """``model.npz``: the label party's trees as arrays (with the party owning each split) or a partner's
        records; both with this party's encoder and bins, nothing of a peer's."""
        assert self.encoder is not None
        state: dict[str, Any] = {"party": self.name, "role": self.role, "kind": "boosting",
                                 "encoder": self.encoder.state(), "bins": bins_state(self.bins)}
        if self.role == "label":
            state.update(partners=self.partners, base=self.model.base, widths=list(self.model.widths),
                         **trees_state(self.model.trees))
        else:
            m = self.model
            state["records"] = np.stack([m.columns, m.bins, m.missing_left.astype(np.int64)], axis=1).astype(np.int64)
        path = self.folder / "model.npz"
        save_checkpoint(path, state, run_id=self.config.output.run_id, party=self.name)
        return path

    def load_model(self) -> None:
        """This party's ``model.npz`` (trees or records, encoder, bins)."""
        from vsplit.boosting import BoostModel, PartnerModel

        path, state = read_model(self.folder, run_id=self.config.output.run_id, party=self.name, role=self.role,
                                 kind="boosting", what="boosting model")
        with interpreting(path):
            self.encoder = Encoder.from_state(state["encoder"])
            self.bins = bins_from(state["bins"])
            if self.role == "label":
                self.partners = list(state["partners"])
                self.model = BoostModel(trees=tuple(trees_from(state)), base=float(state["base"]),
                                        widths=tuple(int(w) for w in state["widths"]))
            else:
                r = np.asarray(state["records"], dtype=np.int64).reshape(-1, 3)
                self.model = PartnerModel(columns=r[:, 0], bins=r[:, 1], missing_left=r[:, 2].astype(np.uint8),
                                          width=self.bins.width)

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score_session(self, table: pd.DataFrame, *, psi_state: Path | None = None, source: Path | None = None,
                      psi_stage: str = "psi") -> Any:
        """Align ``table``'s customers by PSI, then one round: each partner's decisions for every recorded split; the
        label party gets the probabilities of the shared customers."""
        from vsplit.app.session import psi_machine
        from vsplit.boosting import LabelPredict, PartnerPredict
        from vsplit.data.sources import about_file
        from vsplit.psi.alignment import canonical_rows

        assert self.encoder is not None
        d = self.config.data
        with about_file(source):
            values = self.encoder.transform(table)
        alignment = yield psi_stage, psi_machine(self.name, self.topology, table[d.id_column],
                                                 self.psi_settings("test", state_dir=psi_state))
        rows = canonical_rows(alignment)
        codes = self.bins.transform(values[rows])
        if self.role == "label":
            machine: Any = LabelPredict(self.model, own_codes=codes, partners=self.partners)
        else:
            machine = PartnerPredict(self.model, codes=codes, label=self.hub)
        proba = yield "score", machine
        ids = table[d.id_column].to_numpy()
        return Scored(table=table, ids=ids, rows=rows, proba=proba if self.role == "label" else None,
                      psi=psi_summary(alignment))

    # -- outputs -----------------------------------------------------------------------------------------------------
    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> BoostResult:
        """This party's result (the label party: the test AUC on the shared test rows), result.json and report."""
        alignment, scored = outcome
        seconds = dict(seconds)
        if "score" in seconds or "test psi" in seconds:  # the word that scoring follows, its PSI and its round
            seconds["score"] = (seconds.pop("then score", 0.0) + seconds.pop("test psi", 0.0)
                                + seconds.pop("score", 0.0))
        result = BoostResult(party=self.name, role=self.role, psi={"train": psi_summary(alignment)}, comm=comm,
                             trees=self.trees_done, validation_losses=[round(v, 6) for v in self.losses],
                             kept_trees=len(self.model.trees) if self.role == "label" else None,
                             resumed_from=self._resumed_from,
                             seconds={k: round(v, 3) for k, v in seconds.items()},
                             work_seconds={k: round(v, 3) for k, v in sorted(self.work_seconds.items())})
        if scored is not None:
            result.psi["test"] = scored.psi
            if self.role == "label":
                from sklearn.metrics import roc_auc_score

                y = self._labels(scored.table.iloc[scored.rows])
                result.test = {"auc": float(roc_auc_score(y, scored.proba)) if len(set(y)) == 2 else None,
                               "n_scored": len(scored.rows)}
        self.write_json("result.json", result.__dict__)
        self._record_for_serving(alignment)  # peers.json, and the label party's training intersection
        self._write_report(result, scored)
        if self.role == "label":  # model_card.md, .html and .json: the trees, each party's splits, what leaks
            self._write_card(result, scored)
        self.forget_psi_progress()
        return result

    def _write_card(self, result: BoostResult, scored: Any) -> None:
        from vsplit.explain.boost_card import boost_card
        from vsplit.report.card import write_model_card

        y = self._labels(scored.table.iloc[scored.rows]) if scored is not None else None
        write_model_card(self.folder, boost_card(self, result, scored, y))

    def _write_report(self, result: BoostResult, scored: Any) -> Path:
        """``report.json`` and ``report.md`` (:mod:`vsplit.node.boost_report`): the label party's full one with a
        scored test set, else this party's own."""
        from vsplit.node.boost_report import write_boost_report

        y = self._labels(scored.table.iloc[scored.rows]) if scored is not None and self.role == "label" else None
        return write_boost_report(self, result, scored, y)


class TreeCheckpoints:
    """A training machine that calls ``save(inner)`` whenever ``count(inner)``, its finished trees, grows
    (``inner``: the training machine inside ``machine``, default ``machine`` itself)."""

    def __init__(self, machine: Any, *, count: Any, save: Any, inner: Any = None) -> None:
        self.machine, self._count, self._save = machine, count, save
        self.inner = inner if inner is not None else machine
        self._seen = count(self.inner)
        self.seconds = 0.0  # spent in save

    @property
    def trees(self) -> int:
        """Trees finished so far."""
        return self._seen

    @property
    def done(self) -> bool:
        return bool(self.machine.done)

    @property
    def result(self) -> Any:
        return self.machine.result

    def expects(self, peer: str) -> bool:
        return bool(self.machine.expects(peer))

    def progress(self, *, total: int) -> dict[str, Any]:
        """What a console shows of this run (read from another thread: reads only): trees done of ``total`` and,
        where the machine stops early on held-out rows, the held-out log loss after each tree."""
        losses = list(getattr(self.machine, "losses", ()))
        return {"unit": "trees", "done": self._seen, "total": total, "loss_name": "held-out log loss",
                "loss": [[k, round(float(v), 6)] for k, v in enumerate(losses, start=1)]}

    def start(self) -> list[Any]:
        return self._after(self.machine.start())

    def receive(self, sender: str, msg: Any) -> list[Any]:
        return self._after(self.machine.receive(sender, msg))

    def _after(self, out: list[Any]) -> list[Any]:
        now = self._count(self.inner)
        if now > self._seen:
            self._seen = now
            began = time.perf_counter()
            self._save(self.inner)
            self.seconds += time.perf_counter() - began
        return out


def _saved_ranks(saved: Mapping[str, Any] | None) -> np.ndarray | None:
    """The renumbering of this party's codes a checkpoint kept (``None``: none, or no checkpoint)."""
    return None if saved is None else bins_from(saved["bins"]).ranks
