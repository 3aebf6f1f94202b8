"""One organization's process: its config, its data, its channels, and the protocols it runs in turn.

Theory of operation. :class:`PartyNode` reads the party's own table, builds its :class:`~vsplit.party.LabelParty`
or :class:`~vsplit.party.FeatureParty`, and runs, over one :class:`~vsplit.runtime.pump.Pump`, the same sans-IO
machines the in-process runtime uses: PSI to align the customers, then split training (with a checkpoint at every
epoch end), then, if a test table is configured, PSI and scoring on it. The channels come from
:func:`vsplit.transport.connect.open_channels` (mutual TLS) unless a test hands in others.

The session id is derived from ``output.run_id``, which both organizations set to the same value: frames of another
run are refused. Same seeds give the same model here as in one process (``tests/test_run_tls.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vsplit.config import PartyConfig, resolve
from vsplit.data.sources import read_table
from vsplit.errors import CheckpointError, ConfigError
from vsplit.metrics import binary_metrics
from vsplit.models.seeds import derive_seed
from vsplit.party import FeatureParty, LabelParty, ModelSettings, binarise
from vsplit.protocol.training import Plan
from vsplit.psi import IdPolicy, Partner, PsiConfig, run_party
from vsplit.psi import LabelParty as PsiLabelParty
from vsplit.runtime.alignment import canonical_rows
from vsplit.runtime.atomic import write_atomic
from vsplit.runtime.checkpoint import load_checkpoint, save_checkpoint
from vsplit.runtime.progress import EpochClock, TqdmProgress
from vsplit.runtime.pump import Pump
from vsplit.transport.channel import Channel

log = logging.getLogger(__name__)


def session_id(run_id: str) -> bytes:
    """The 16-byte session id both parties derive from the shared run id."""
    return hashlib.sha256(f"vsplit-session:{run_id}".encode()).digest()[:16]


@dataclass
class Scored:
    """A scored table: its IDs, the rows every party knows (in the agreed order) and, at the label party, scores."""

    table: pd.DataFrame
    ids: np.ndarray
    rows: np.ndarray
    proba: np.ndarray | None
    psi: dict[str, Any]


@dataclass
class NodeResult:
    """What one party learned from a run (the label party also gets metrics)."""

    party: str
    role: str
    psi: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int | None = None
    epoch_seconds: list[float] = field(default_factory=list)
    test: dict[str, Any] | None = None
    baselines: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    comm: dict[str, Any] = field(default_factory=dict)


class PartyNode:
    """Runs one party of a split-learning session, as configured by ``config``."""

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        self.config = config
        self.name = config.party.name
        self.role = config.party.role
        self.resume = resume
        self.progress = progress
        self.folder = resolve(config, config.output.dir) / config.output.run_id / self.name
        torch.set_num_threads(max(1, config.train.threads))
        self.table = read_table(
            resolve(config, config.data.path),
            id_column=config.data.id_column,
            features=config.data.features,
            label=config.data.label,
        )
        self.party = self._build_party(self.table)
        self._hooks: Any = None

    # -- building ----------------------------------------------------------------------------------------------------
    def _settings(self) -> ModelSettings:
        m, t, d = self.config.model, self.config.train, self.config.data
        return ModelSettings(
            embedding_width=m.embedding_width, bottom_hidden=m.bottom_hidden, top_hidden=m.top_hidden,
            merge=m.merge, dropout=m.dropout, optimizer=t.optimizer, lr=t.lr, weight_decay=t.weight_decay,
            scaling=d.scaling, missing=d.missing,
        )

    def _build_party(self, table: pd.DataFrame) -> LabelParty | FeatureParty:
        d = self.config.data
        categorical = list(d.categorical) if d.categorical is not None else None
        if self.role == "label":
            assert d.label is not None
            return LabelParty(self.name, table, label=d.label, id_column=d.id_column, positive_label=d.positive_label,
                              settings=self._settings(), categorical=categorical, seed=self.config.train.seed)
        return FeatureParty(self.name, table, id_column=d.id_column, settings=self._settings(),
                            categorical=categorical, seed=self.config.train.seed)

    @property
    def peers(self) -> list[str]:
        return list(self.config.network.peers)

    # -- channels ----------------------------------------------------------------------------------------------------
    def open_channels(self) -> dict[str, Channel]:
        """Mutual-TLS channels to the peers: the label party listens, feature parties dial."""
        from vsplit.transport.connect import open_channels
        from vsplit.transport.stream import ChannelOptions

        net = self.config.network
        address = net.listen if self.role == "label" else net.dial
        assert address is not None
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            key = "network.listen" if self.role == "label" else "network.dial"
            raise ConfigError(f"{key}: {address!r} is not HOST:PORT")
        options = ChannelOptions(max_frame=net.max_frame_mb << 20)
        return dict(open_channels(
            self.name,
            role="listen" if self.role == "label" else "dial",
            address=(host, int(port)),
            own_cert=resolve(self.config, net.cert),
            own_key=resolve(self.config, net.key),
            peers={peer: resolve(self.config, path) for peer, path in net.peers.items()},
            deadline_s=net.connect_timeout_s,
            options=options,
        ))

    # -- the run -----------------------------------------------------------------------------------------------------
    def run(self, channels: Mapping[str, Channel] | None = None) -> NodeResult:
        """PSI, training and (if configured) test scoring, as one party; returns what this party learned."""
        started = time.perf_counter()
        checkpointing = self._checkpointing()  # before connecting: a bad --resume fails at once
        channels = dict(channels) if channels is not None else self.open_channels()
        seconds = {"connect": time.perf_counter() - started}
        pump = Pump(self.name, channels, session=session_id(self.config.output.run_id),
                    timeout=self.config.network.read_timeout_s)
        scored = None
        try:
            phase = time.perf_counter()
            alignment = run_party(pump, self.psi_machine(self.party.ids))
            seconds["psi"] = time.perf_counter() - phase
            phase = time.perf_counter()
            result = self._train(pump, canonical_rows(alignment), checkpointing)
            seconds["train"] = time.perf_counter() - phase
            self.save_model()
            if self.config.data.test_path:  # "" (e.g. --set data.test_path="") means none
                phase = time.perf_counter()
                data = self.config.data
                assert data.test_path
                test = read_table(resolve(self.config, data.test_path), id_column=data.id_column,
                                  features=data.features, label=data.label)
                scored = self.score(pump, test)
                seconds["score"] = time.perf_counter() - phase
        finally:
            for channel in channels.values():
                channel.close()
        result.psi = {"train": psi_summary(alignment)}
        result.comm = pump.stats.as_dict()
        if scored is not None:
            result.psi["test"] = scored.psi
            if isinstance(self.party, LabelParty):
                result.test = evaluate_labels(self.party, scored.table, scored.rows, scored.proba)
                result.test["n_scored"] = len(scored.rows)
                if self.config.output.baselines:
                    phase = time.perf_counter()
                    result.baselines = {"label_party_only": self.label_party_only(scored.table, scored.rows)}
                    seconds["baseline"] = time.perf_counter() - phase
        result.seconds = {k: round(v, 3) for k, v in seconds.items()}
        self._write_json("result.json", result.__dict__)
        self.write_report(result, scored)
        return result

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score(self, pump: Pump, table: pd.DataFrame) -> Scored:
        """Align ``table``'s customers with the peers by PSI and score them; only the label party gets scores."""
        ids, inputs = self.party.prepare(table)
        alignment = run_party(pump, self.psi_machine(ids))
        rows = canonical_rows(alignment)
        pick = None if inputs is None else (inputs[0][rows], inputs[1][rows])
        if isinstance(self.party, LabelParty):
            width = self.config.model.embedding_width
            remote = {p: self.config.model.peer_widths.get(p, width) for p in self.peers}
            proba = pump.run(self.party.scorer(pick, remote=remote, n_rows=len(rows)))
        else:
            assert pick is not None
            hooks = self._hooks if self._hooks is not None else self.defense_hooks()
            pump.run(self.party.scorer(pick, label_party=self.peers[0],
                                       embedding_hooks=hooks.embedding_hooks.get(self.name, ())))
            proba = None
        return Scored(table=table, ids=ids, rows=rows, proba=proba, psi=psi_summary(alignment))

    def label_party_only(self, test: pd.DataFrame, rows: np.ndarray) -> dict[str, float]:
        """The baseline the bank can compute alone: the same code with no partner, scored on the same rows."""
        assert isinstance(self.party, LabelParty)
        alone = self._build_party(self.table)
        assert isinstance(alone, LabelParty)
        own = np.argsort(alone.ids, kind="stable")
        t = self.config.train
        plan = Plan(epochs=t.epochs, batch_size=t.batch_size, seed=derive_seed(t.seed, "schedule") % 2**31,
                    roles=alone.make_roles(own, validation_fraction=t.validation_fraction, seed=t.seed))
        trainer = alone.trainer(own, remote={}, plan=plan, patience=t.patience)
        trainer.start()
        _, inputs = alone.prepare(test)
        assert inputs is not None and trainer.done
        scorer = alone.scorer((inputs[0][rows], inputs[1][rows]), remote={}, n_rows=len(rows))
        scorer.start()
        metrics = evaluate_labels(alone, test, rows, scorer.result)
        metrics["n_scored"] = len(rows)
        return metrics

    def psi_machine(self, ids: np.ndarray) -> Any:
        """This party's PSI machine over ``ids``, as configured (run id bound into the session salt)."""
        psi = self.config.psi
        config = PsiConfig(reveal=psi.reveal, context=self.config.output.run_id)
        policy = IdPolicy(casefold=psi.case_fold, dedupe=psi.duplicates)
        if self.role == "label":
            return PsiLabelParty(list(ids), partners=self.peers, config=config, policy=policy)
        return Partner(list(ids), label_party=self.peers[0], config=config, policy=policy)

    def defense_hooks(self) -> Any:
        """The training hooks of this party's configured defenses (``privacy.defenses``)."""
        from vsplit.estimator import TrainingHooks
        from vsplit.privacy.defenses import make_defense

        texts = self.config.privacy.defenses
        if not texts:
            return TrainingHooks()
        defense = make_defense("+".join(texts))
        partners = self.peers if self.role == "label" else [self.name]
        return defense.hooks(feature_parties=partners, seed=derive_seed(self.config.train.seed, "defense"))

    def _train(self, pump: Pump, rows: np.ndarray, checkpointing: tuple[int, Any, Any]) -> NodeResult:
        clock = EpochClock()
        callbacks = [TqdmProgress(desc=f"{self.name} epoch", disable=not self.progress), clock]
        last, restore, save = checkpointing
        hooks = self._hooks = self.defense_hooks()
        if isinstance(self.party, LabelParty):
            t = self.config.train
            roles = self.party.make_roles(rows, validation_fraction=t.validation_fraction, seed=t.seed)
            plan = Plan(epochs=t.epochs, batch_size=t.batch_size, seed=derive_seed(t.seed, "schedule") % 2**31,
                        roles=roles)
            width = self.config.model.embedding_width
            remote = {p: self.config.model.peer_widths.get(p, width) for p in self.peers}
            trainer = self.party.trainer(rows, remote=remote, plan=plan, patience=t.patience, callbacks=callbacks,
                                         resume_epoch=last, restore=restore, on_epoch_end=save,
                                         gradient_hooks=hooks.gradient_hooks, label_transform=hooks.label_transform)
            training = pump.run(trainer)
            return NodeResult(party=self.name, role=self.role, psi={}, history=training.history,
                              best_epoch=training.best_epoch, epoch_seconds=[round(s, 4) for s in clock.seconds])
        trainer = self.party.trainer(rows, label_party=self.peers[0], resume_epoch=last, restore=restore,
                                     on_epoch_end=save, embedding_hooks=hooks.embedding_hooks.get(self.name, ()),
                                     local_loss=hooks.local_losses.get(self.name))
        pump.run(trainer)
        return NodeResult(party=self.name, role=self.role, psi={})

    # -- joint prediction with saved model parts ---------------------------------------------------------------------
    def load_model(self) -> None:
        """Load this party's own saved model part (and preprocessing) from ``model.npz``."""
        from vsplit.data.preprocess import TablePreprocessor

        state = load_checkpoint(self.folder / "model.npz", run_id=self.config.output.run_id, party=self.name)
        if state["role"] != self.role:
            raise CheckpointError(f"{self.folder / 'model.npz'} is a {state['role']} party's model, not {self.role}")
        party = self.party
        if "preprocessor" in state:
            party.preprocessor = TablePreprocessor.from_state(state["preprocessor"])
        if party.model is not None:
            party.model.load_state_dict(state["bottom"])
        if isinstance(party, LabelParty):
            party.build_top(state["top_widths"])
            assert party.top is not None
            party.top.load_state_dict(state["top"])

    def predict(self, table_path: Path, *, ids_path: Path | None = None,
                channels: Mapping[str, Channel] | None = None) -> Path:
        """Score customers jointly with the saved model parts; the label party writes ``predictions.csv``.

        The label party scores the IDs in ``ids_path`` (default: every row of its ``table_path``) using its own
        columns from ``table_path``; each partner contributes the customers of its ``table_path`` it knows. IDs
        that some party does not know are listed with a status, never silently dropped.
        """
        self.load_model()
        d = self.config.data
        table = read_table(table_path, id_column=d.id_column, features=self.party.feature_columns or None)
        requested: list[str] | None = None
        if ids_path is not None and isinstance(self.party, LabelParty):
            requested = [str(v).strip() for v in read_table(ids_path, id_column=d.id_column, features=[])[d.id_column]]
            table = table[table[d.id_column].isin(set(requested))].reset_index(drop=True)
        channels = dict(channels) if channels is not None else self.open_channels()
        pump = Pump(self.name, channels, session=session_id(self.config.output.run_id + ":predict"),
                    timeout=self.config.network.read_timeout_s)
        started = time.perf_counter()
        try:
            scored = self.score(pump, table)
        finally:
            for channel in channels.values():
                channel.close()
        seconds = {"predict": round(time.perf_counter() - started, 3)}
        summary = {"run_id": self.config.output.run_id, "party": self.name, "psi": scored.psi, "seconds": seconds,
                   "communication": pump.stats.as_dict()}
        if not isinstance(self.party, LabelParty):
            return self._write_json("predict.json", summary)
        assert scored.proba is not None
        ids = [str(v) for v in scored.ids]
        proba = dict(zip([ids[r] for r in scored.rows], scored.proba.tolist(), strict=True))
        own = set(ids)
        wanted = requested if requested is not None else ids
        out = pd.DataFrame({
            d.id_column: wanted,
            "probability": [proba.get(i) for i in wanted],
            "status": ["scored" if i in proba else ("unknown to a partner" if i in own else f"unknown to {self.name}")
                       for i in wanted],
        })
        path = self.folder / "predictions.csv"
        write_atomic(path, out.to_csv(index=False).encode())
        counts = out["status"].value_counts().to_dict()
        summary["counts"] = {k: int(v) for k, v in counts.items()}
        self._write_json("predict.json", summary)
        log.info("predictions: %s", summary["counts"])
        return path

    # -- checkpoints and outputs -------------------------------------------------------------------------------------
    def _checkpointing(self) -> tuple[int, Any, Any]:
        folder = self.folder / "checkpoints"
        run_id = self.config.output.run_id

        def path(epoch: int) -> Path:
            return folder / f"epoch-{epoch:04d}.npz"

        def save(state: dict[str, Any]) -> None:
            save_checkpoint(path(state["epoch"]), state, run_id=run_id, party=self.name)
            for old in sorted(folder.glob("epoch-*.npz"))[:-2]:  # keep the last two: a peer may be one behind
                old.unlink()

        def restore(epoch: int) -> dict[str, Any]:
            return load_checkpoint(path(epoch), run_id=run_id, party=self.name)

        last = -1
        if self.resume:
            found = sorted(folder.glob("epoch-*.npz"))
            if not found:
                raise CheckpointError(f"{self.name}: --resume given but no checkpoint in {folder}; start without it")
            last = int(found[-1].stem.split("-")[1])
            restore(last)  # fail early on a checkpoint of another run or party
        elif folder.exists():
            for stale in folder.glob("epoch-*.npz"):
                stale.unlink()
        return last, restore, save

    def save_model(self) -> Path:
        """Write this party's own model part (and its preprocessing) to ``model.npz``; nothing of a peer's."""
        party = self.party
        state: dict[str, Any] = {"party": self.name, "role": self.role, "settings": self._settings().__dict__,
                                 "feature_columns": party.feature_columns, "id_column": party.id_column}
        if party.model is not None:
            state["bottom"] = party.model.state_dict()
        if party.preprocessor is not None:
            state["preprocessor"] = party.preprocessor.state()
        if isinstance(party, LabelParty):
            assert party.top is not None
            state["top"] = party.top.state_dict()
            state["top_widths"] = dict(party.top_widths)
            state["label"] = party.label
            state["positive_label"] = _jsonable(party.positive_label)
        path = self.folder / "model.npz"
        save_checkpoint(path, state, run_id=self.config.output.run_id, party=self.name)
        return path

    def config_hash(self) -> str:
        return hashlib.sha256(Path(self.config.source).read_bytes()).hexdigest()

    def write_report(self, result: NodeResult, scored: Scored | None) -> Path:
        """The label party's full report (metrics, baselines, plots), or a feature party's own."""
        from vsplit.report import write_label_report, write_partner_report, write_plots

        common = {"run_id": self.config.output.run_id, "party": self.name, "role": self.role,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "seconds": result.seconds,
                  "config_hashes": {self.name: self.config_hash()}}
        if not isinstance(self.party, LabelParty) or scored is None or result.test is None:
            return write_partner_report(self.folder, {**common, "communication": result.comm, "psi": result.psi})
        assert scored.proba is not None
        y = binarise(scored.table[self.party.label], self.party.positive_label, self.party.label).numpy()[scored.rows]
        aucs = {"split": result.test["auc"], **{k: v["auc"] for k, v in result.baselines.items()}}
        plots = write_plots(self.folder, y=y, proba=scored.proba, history=result.history, aucs=aucs)
        report = {**common, "metrics": result.test, "baselines": result.baselines, "history": result.history,
                  "best_epoch": result.best_epoch, "psi": result.psi,
                  "communication": {self.name: {"sent": result.comm["sent"], "received": result.comm["received"]}},
                  "plots": plots}
        return write_label_report(self.folder, report)

    def _write_json(self, name: str, payload: Any) -> Path:
        path = self.folder / name
        write_atomic(path, (json.dumps(payload, indent=2, default=_jsonable) + "\n").encode())
        return path


def evaluate_labels(party: LabelParty, table: pd.DataFrame, rows: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """Metrics of ``proba`` against the label party's own labels of ``rows``."""
    y = binarise(table[party.label], party.positive_label, party.label).numpy()[rows]
    return binary_metrics(y, proba)


def psi_summary(alignment: Any) -> dict[str, Any]:
    stats = alignment.stats
    return {"rows": stats.rows, "size": stats.size, "peer_sizes": dict(stats.peer_sizes),
            "intersection": stats.intersection, "seconds": stats.seconds, "bytes_sent": stats.bytes_sent}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
