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

import functools
import hashlib
import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vsplit import strict_json
from vsplit.app.local import run_sessions
from vsplit.app.session import PsiSettings, Schedule, score_session, train_session
from vsplit.atomic import write_atomic
from vsplit.config import PartyConfig, resolve
from vsplit.config.names import run_folder
from vsplit.config.topology import topology_of
from vsplit.data.parquet_table import open_table
from vsplit.data.sources import about_file, read_table
from vsplit.data.tables import all_ids
from vsplit.errors import CheckpointError, ConfigError, UnreadableCheckpoint
from vsplit.models.seeds import derive_seed
from vsplit.party import ComputeParty, FeatureParty, LabelParty, ModelSettings
from vsplit.protocol.training.hooks import TrainingHooks
from vsplit.runtime.checkpoint import load_checkpoint, save_checkpoint
from vsplit.runtime.jobs import PredictJob
from vsplit.runtime.progress import EpochClock, TqdmProgress
from vsplit.runtime.psi import run_party
from vsplit.runtime.pump import Pump
from vsplit.topology.graph import Topology
from vsplit.transport.channel import Channel

log = logging.getLogger(__name__)


def model_settings(config: PartyConfig) -> ModelSettings:
    """The model, optimizer, preprocessing and codec settings of ``config``'s party."""
    m, t, d, n = config.model, config.train, config.data, config.network
    return ModelSettings(
        embedding_width=m.embedding_width, bottom_hidden=m.bottom_hidden, top_hidden=m.top_hidden,
        merge=m.merge, dropout=m.dropout, optimizer=t.optimizer, lr=t.lr, weight_decay=t.weight_decay,
        scaling=d.scaling, missing=d.missing, compression=n.compression, error_feedback=n.error_feedback,
        max_abs_activation=t.max_abs_activation, max_abs_gradient=t.max_abs_gradient,
        coerce_numbers=d.coerce_numbers,
    )


def admission_policy(config: PartyConfig) -> Any:
    """The listener's limits before the TLS handshake (``network.allow_from``, ``network.first_record_timeout_s``)."""
    from vsplit.transport.admission import AdmissionPolicy

    net = config.network
    return AdmissionPolicy(allow=tuple(net.allow_from), first_record_s=net.first_record_timeout_s)


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
        self.folder = run_folder(resolve(config, config.output.dir), config.output.run_id, self.name)
        torch.set_num_threads(max(1, config.train.threads))
        d = config.data
        reader = open_table if d.stream else read_table  # stream: the table stays in Parquet, read by batches
        self.table = None if self.role == "compute" else reader(
            resolve(config, d.path), id_column=d.id_column, features=d.features, label=d.label)
        self.detector_columns = self._detector_columns()
        with about_file(None if self.table is None else resolve(config, d.path)):
            self.party = self._build_party(self.table)
        self.topology: Topology = topology_of(config, label_has_features=getattr(self.party, "has_features", True))
        self._hooks: Any = None
        self._psi_backend: Any = None  # opened for the run by run(), from [psi] backend and workers
        self.bank_only: Any = None  # the label party's own model, for customers a partner does not know
        self.coverage: Any = None  # the bank-only model on the test table (vsplit.app.fallback.cover_test)

    # -- building ----------------------------------------------------------------------------------------------------
    def _detector_columns(self) -> dict[str, np.ndarray]:
        """Take the detectors' label and canary columns (``privacy.detector_labels``, ``privacy.canary_column``) out
        of the table, so they are never model inputs."""
        p, found = self.config.privacy, {}
        for key in ("detector_labels", "canary_column"):
            column = getattr(p, key)
            if column is None or self.table is None:
                continue
            if column not in self.table.columns:
                raise ConfigError(f"privacy.{key}: column {column!r} not in {self.config.data.path} (it has "
                                  f"{list(self.table.columns)}); fix the column name")
            found[key] = self.table[column].to_numpy()
            self.table = self.table.drop(columns=[column])
        if "canary_column" in found:
            flags = found["canary_column"]
            if flags.dtype != bool and not set(pd.unique(flags)) <= {0, 1}:
                raise ConfigError(f"privacy.canary_column: {p.canary_column!r} must hold true/false (or 1/0)")
            found["canary_column"] = flags.astype(bool)
        return found

    def detectors(self) -> Any:
        """This client's detectors (``privacy.detectors``), or None."""
        if not self.config.privacy.detectors:
            return None
        from vsplit.privacy.detectors.client import ClientDetectors

        assert self.table is not None
        cols = self.detector_columns
        labels = cols["detector_labels"] if "detector_labels" in cols else self.table[self.config.data.label]
        t = self.config.train
        return ClientDetectors(self.config.privacy.detectors, party=self.name, labels=np.asarray(labels),
                               canaries=cols.get("canary_column"), seed=derive_seed(t.seed, "detectors"), lr=t.lr,
                               batch_size=t.batch_size)

    def _settings(self) -> ModelSettings:
        return model_settings(self.config)

    def _build_party(self, table: Any) -> LabelParty | FeatureParty | ComputeParty:
        d = self.config.data
        categorical = list(d.categorical) if d.categorical is not None else None
        if self.role == "compute" or table is None:
            return ComputeParty(self.name, settings=self._settings(), seed=self.config.train.seed)
        if self.role == "label":
            assert d.label is not None
            return LabelParty(self.name, table, label=d.label, id_column=d.id_column, positive_label=d.positive_label,
                              settings=self._settings(), categorical=categorical, seed=self.config.train.seed,
                              task=self.config.topology.task)
        return FeatureParty(self.name, table, id_column=d.id_column, settings=self._settings(),
                            categorical=categorical, seed=self.config.train.seed)

    @property
    def peers(self) -> list[str]:
        return list(self.config.network.peers)

    @property
    def is_hub(self) -> bool:
        """The hub listens; the others dial it: the label party, or the U-shaped compute server."""
        return self.role == ("compute" if self.topology.kind == "u_shaped" else "label")

    # -- channels ----------------------------------------------------------------------------------------------------
    def open_channels(self) -> dict[str, Channel]:
        """Mutual-TLS channels to the peers: the hub listens, the others dial. With ``network.reconnect_timeout_s``
        above 0 they survive dropped connections (:mod:`vsplit.transport.resume`)."""
        from vsplit.transport.connect import open_channels
        from vsplit.transport.stream import ChannelOptions

        net = self.config.network
        address = net.listen if self.is_hub else net.dial
        assert address is not None
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            key = "network.listen" if self.is_hub else "network.dial"
            raise ConfigError(f"{key}: {address!r} is not HOST:PORT")
        opener: Any = open_channels
        if net.reconnect_timeout_s > 0:
            from vsplit.transport.reconnect import open_resumable_channels
            from vsplit.transport.resume import ResumeOptions

            opener = functools.partial(open_resumable_channels, resume=ResumeOptions(timeout_s=net.reconnect_timeout_s))
        return dict(opener(
            self.name,
            role="listen" if self.is_hub else "dial",
            address=(host, int(port)),
            own_cert=resolve(self.config, net.cert),
            own_key=resolve(self.config, net.key),
            peers={peer: resolve(self.config, path) for peer, path in net.peers.items()},
            deadline_s=net.connect_timeout_s,
            options=ChannelOptions(max_frame=net.max_frame_mb << 20),
            **({"admission": admission_policy(self.config)} if self.is_hub else {}),
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
            self._psi_backend = self.open_psi_backend()
            outcome = self._train(pump, checkpointing, seconds)
            result = NodeResult(party=self.name, role=self.role, psi={})
            if isinstance(self.party, LabelParty):
                training = outcome.result
                result.history, result.best_epoch = training.history, training.best_epoch
                result.epoch_seconds = [round(x, 4) for x in outcome.extra["clock"].seconds]
            self.save_model()
            test = self._test_table()
            if test is not None or (self.role == "compute" and outcome.extra["machine"].plan.then_score):
                phase = time.perf_counter()
                scored = self.score(pump, test, source=resolve(self.config, self.config.data.test_path or ""))
                seconds["score"] = time.perf_counter() - phase
        except BaseException as exc:  # a failure between protocols (e.g. an unreadable test table) is told too
            pump.fail(exc)
            raise
        finally:
            for channel in channels.values():
                channel.close()
            if self._psi_backend is not None:
                self._psi_backend.close()
                self._psi_backend = None
        self.bank_only = self.train_fallback()  # after the channels close: no partner waits for it
        result.psi = {"train": psi_summary(outcome.alignment)} if outcome.alignment is not None else {}
        result.comm = pump.stats.as_dict()
        if scored is not None:
            if scored.psi:
                result.psi["test"] = scored.psi
            if isinstance(self.party, LabelParty):
                result.test = evaluate_labels(self.party, scored.table, scored.rows, scored.proba)
                result.test["n_scored"] = len(scored.rows)
                if self.bank_only is not None:
                    from vsplit.app.fallback import cover_test

                    self.coverage = cover_test(self.bank_only, scored.table, scored.rows, scored.proba)
                if self.config.output.baselines:
                    phase = time.perf_counter()
                    alone = self.label_party_only(scored.table, scored.rows)
                    if alone is not None:
                        result.baselines = {"label_party_only": alone}
                    seconds["baseline"] = time.perf_counter() - phase
        result.seconds = {k: round(v, 3) for k, v in seconds.items()}
        self._write_json("result.json", result.__dict__)
        self.write_report(result, scored)
        self.forget_psi_progress()
        return result

    def _test_table(self) -> pd.DataFrame | None:
        data = self.config.data
        if not data.test_path or self.role == "compute":  # "" (e.g. --set data.test_path="") means none
            return None
        return read_table(resolve(self.config, data.test_path), id_column=data.id_column, features=data.features,
                          label=data.label, option="data.test_path")

    def _drive(self, session: Any, pump: Pump, seconds: dict[str, float]) -> Any:
        """Run this party's session over ``pump``: each stage's machine in turn (the same session as in-process)."""
        try:
            stage, machine = next(session)
            while True:
                began = time.perf_counter()
                value = run_party(pump, machine) if stage == "psi" else pump.run(machine)
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - began
                stage, machine = session.send(value)
        except StopIteration as stop:
            return stop.value

    def psi_settings(self, stage: str = "train", *, state_dir: Path | None = None) -> PsiSettings:
        """This party's PSI settings for ``stage`` (``train``, ``test`` or ``psi``), as configured (run id bound into
        the session salt); with ``psi.resumable`` its progress is kept under ``state_dir`` (default
        ``psi-state/<stage>``)."""
        from vsplit.psi import IdPolicy, PsiConfig

        psi = self.config.psi
        config = PsiConfig(reveal=psi.reveal, context=self.config.output.run_id, buckets=psi.buckets,
                           memory_budget_mb=psi.memory_budget_mb)
        state_dir = (state_dir or self.folder / "psi-state" / stage) if psi.resumable else None
        return PsiSettings(config=config, policy=IdPolicy(casefold=psi.case_fold, dedupe=psi.duplicates),
                           backend=self._psi_backend, state_dir=state_dir)

    def psi_machine(self, ids: Any) -> Any:
        """This party's PSI machine for ``ids`` alone (``vsplit psi``), its progress under ``psi-state/psi``."""
        from vsplit.app.session import psi_machine

        return psi_machine(self.name, self.topology, ids, self.psi_settings("psi"))

    def forget_psi_progress(self) -> None:
        """Delete the kept PSI progress once the run that needed it has succeeded."""
        import shutil

        shutil.rmtree(self.folder / "psi-state", ignore_errors=True)

    def open_psi_backend(self) -> Any:
        """Where this party's PSI curve arithmetic runs (``[psi] backend``, ``workers``, ``ray_address``)."""
        if self.role == "compute":
            return None
        from vsplit.psi.parallel import open_backend

        psi = self.config.psi
        return open_backend(psi.backend, workers=psi.workers, ray_address=psi.ray_address)

    def schedule(self, *, then_score: bool = False) -> Schedule:
        t = self.config.train
        return Schedule(epochs=t.epochs, batch_size=t.batch_size, validation_fraction=t.validation_fraction,
                        patience=t.patience, monitor=t.monitor, seed=t.seed, then_score=then_score,
                        window=t.pipeline_window, local_steps=t.local_steps, min_class_rows=t.min_class_rows)

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score(self, pump: Pump, table: pd.DataFrame | None, *, psi_state: Path | None = None,
              source: Path | None = None) -> Scored:
        """Align ``table``'s customers with the peers by PSI (where the split needs it) and score them jointly;
        only the label party gets scores. A compute party has no table (``None``). ``psi_state``: where the
        alignment keeps its resumable progress (default: the run's ``psi-state/test``); ``source``: the file the
        table came from, named in data errors."""
        with about_file(source):
            prepared = self.party.prepare(table) if table is not None else None
        hooks = self._hooks if self._hooks is not None else self.defense_hooks()
        psi = self.psi_settings("test", state_dir=psi_state)
        session = score_session(self.party, self.topology, prepared, psi=psi, hooks=hooks)
        outcome = self._drive(session, pump, {})
        ids = prepared[0] if prepared is not None else np.zeros(0, dtype=object)
        rows = outcome.rows if outcome.rows is not None else np.zeros(0, dtype=np.int64)
        proba = outcome.result if isinstance(self.party, LabelParty) else None
        psi = psi_summary(outcome.alignment) if outcome.alignment is not None else {}
        return Scored(table=table if table is not None else pd.DataFrame(), ids=ids, rows=rows, proba=proba, psi=psi)

    def label_party_only(self, test: pd.DataFrame, rows: np.ndarray) -> dict[str, float] | None:
        """The baseline the label party can compute alone, scored on the same rows: its own columns alone
        (vertical), or the same network trained without the server (U-shaped); none where it has no features."""
        assert isinstance(self.party, LabelParty)
        if self.coverage is not None:  # vertical: the bank-only fallback is this baseline, already trained and scored
            metrics = evaluate_labels(self.party, test, rows, self.coverage.proba[rows])
            chosen = chosen_record(self.bank_only.history, self.bank_only.best_epoch)
            return {**metrics, "n_scored": len(rows), **({"val_loss": chosen["val_loss"]}
                                                          if chosen is not None and "val_loss" in chosen else {})}
        alone = self._build_party(self.table)
        assert isinstance(alone, LabelParty)
        if not alone.has_features:
            return None
        if self.topology.kind == "u_shaped":
            run = self.topology.placed_on(self.name)
            server = ComputeParty(self.topology.segment("middle").owner, settings=self._settings(),
                                  seed=self.config.train.seed)
            placed = {seg: (module, None) for seg, module in server.modules_for(self.topology).items()}
        else:
            run = Topology.vertical(label_party=self.name, feature_parties=[], width=self.config.model.embedding_width)
            placed = None
        own = np.argsort(all_ids(alone.ids), kind="stable")
        sid = session_id(self.config.output.run_id + ":alone")
        trained = run_sessions({self.name: train_session(alone, run, schedule=self.schedule(), rows=own,
                                                         placed=placed)}, session=sid)[self.name].result
        ids, inputs = alone.prepare(test)
        scored = run_sessions({self.name: score_session(alone, run, (ids, inputs), rows=rows, placed=placed)},
                              session=sid)
        metrics = evaluate_labels(alone, test, rows, scored[self.name].result)
        metrics["n_scored"] = len(rows)
        chosen = chosen_record(trained.history, trained.best_epoch)
        if chosen is not None and "val_loss" in chosen:
            metrics["val_loss"] = chosen["val_loss"]  # at its chosen epoch, on its own validation rows
        return metrics

    def train_fallback(self) -> Any:
        """Train and save (``fallback.npz``) the label party's own model on its own columns, for the customers a
        partner does not know; ``None`` for a feature party, another topology or a label party without columns."""
        if self.role != "label" or self.topology.kind != "vertical" or self.table is None:
            return None
        from vsplit.app.fallback import FILE, save_bank_only, train_bank_only

        alone = self._build_party(self.table)
        if not isinstance(alone, LabelParty) or not alone.has_features or alone.task.name != "binary":
            return None
        sid = session_id(self.config.output.run_id + ":alone")
        model = train_bank_only(alone, schedule=self.schedule(), session=sid)
        save_bank_only(model, self.folder / FILE, run_id=self.config.output.run_id)
        return model

    def defense_hooks(self) -> Any:
        """The training hooks of this party's configured defenses (``privacy.defenses``)."""
        texts = self.config.privacy.defenses
        if not texts or self.role == "compute":
            return TrainingHooks()
        from vsplit.privacy.defenses import make_defense

        defense = make_defense("+".join(texts))
        partners = self.peers if self.role == "label" else [self.name]
        return defense.hooks(feature_parties=partners, seed=derive_seed(self.config.train.seed, "defense"))

    def _train(self, pump: Pump, checkpointing: tuple[int, Any, Any], seconds: dict[str, float]) -> Any:
        clock = EpochClock()
        bar = TqdmProgress(desc=f"{self.name} training", disable=not self.progress)
        callbacks = [bar, clock]
        hooks = self._hooks = self.defense_hooks()
        detectors = self.detectors()
        if detectors is not None:
            from vsplit.privacy.hooks import merge_hooks

            hooks = merge_hooks(hooks, detectors.hooks())
        then_score = self.role == "label" and bool(self.config.data.test_path)
        session = train_session(self.party, self.topology, schedule=self.schedule(then_score=then_score),
                                psi=self.psi_settings(), hooks=hooks, callbacks=callbacks,
                                checkpointing=checkpointing, prepare=detectors and detectors.prepare)
        outcome = self._drive(session, pump, seconds)
        bar.close()
        outcome.extra["clock"] = clock
        return outcome

    # -- joint prediction with saved model parts ---------------------------------------------------------------------
    def load_model(self) -> None:
        """Load this party's own saved model parts (and preprocessing) from ``model.npz``."""
        from vsplit.data.preprocess import TablePreprocessor

        path = self.folder / "model.npz"
        state = load_checkpoint(path, run_id=self.config.output.run_id, party=self.name)
        if state["role"] != self.role:
            raise CheckpointError(f"{path} is a {state['role']} party's model, not {self.role}")
        if state.get("topology") != self.topology.view_fingerprint(self.name):
            raise CheckpointError(f"{path} was trained with another topology than {self.config.source} describes; "
                                  "predict with the config it was trained with")
        party = self.party
        if "preprocessor" in state:
            party.preprocessor = TablePreprocessor.from_state(state["preprocessor"])
        width = party.task_width if isinstance(party, LabelParty) else 1
        for seg, module in party.modules_for(self.topology, task_width=width).items():
            module.load_state_dict(state["segments"][seg])

    def predict(self, table_path: Path | None, *, ids_path: Path | None = None,
                channels: Mapping[str, Channel] | None = None, job: PredictJob | None = None) -> Path:
        """Score customers jointly with the saved model parts; the label party writes ``predictions.csv``.

        The label party scores the IDs in ``ids_path`` (default: every row of its ``table_path``) using its own
        columns from ``table_path``; each partner contributes the customers of its ``table_path`` it knows. IDs
        that some party does not know are listed with a status, never silently dropped. Everything goes to the
        folder of ``job`` (default: a new job, :mod:`vsplit.runtime.jobs`), which also keeps its PSI progress.
        """
        job = job if job is not None else PredictJob.open(self.folder)
        self.load_model()
        d = self.config.data
        table = None
        if not isinstance(self.party, ComputeParty):
            if table_path is None:
                raise ConfigError(f"{self.name}: predict needs --input, this party's table of the customers to score")
            table = read_table(table_path, id_column=d.id_column, features=self.party.feature_columns or None,
                               option="--input")
        requested: list[str] | None = None
        if ids_path is not None and isinstance(self.party, LabelParty) and table is not None:
            id_table = read_table(ids_path, id_column=d.id_column, features=[], option="--ids")
            requested = [str(v).strip() for v in id_table[d.id_column]]
            table = table[table[d.id_column].isin(set(requested))].reset_index(drop=True)
        channels = dict(channels) if channels is not None else self.open_channels()
        pump = Pump(self.name, channels, session=session_id(self.config.output.run_id + ":predict"),
                    timeout=self.config.network.read_timeout_s)
        started = time.perf_counter()
        try:
            scored = self.score(pump, table, psi_state=job.psi_state, source=table_path)
        except BaseException as exc:
            pump.fail(exc)
            raise
        finally:
            for channel in channels.values():
                channel.close()
        seconds = {"predict": round(time.perf_counter() - started, 3)}
        summary = {"run_id": self.config.output.run_id, "party": self.name, "job": job.id, "resumed": job.resumed,
                   "psi": scored.psi, "seconds": seconds, "communication": pump.stats.as_dict()}
        if not isinstance(self.party, LabelParty):
            job.finish()
            return self._write_json("predict.json", summary, folder=job.folder)
        assert scored.proba is not None
        ids = [str(v) for v in scored.ids]
        proba = dict(zip([ids[r] for r in scored.rows], scored.proba.tolist(), strict=True))
        own = set(ids)
        wanted = requested if requested is not None else ids
        from vsplit.app.fallback import FILE, load_bank_only, score_unknown, which_model

        saved = self.folder / FILE  # the label party's own model, if the run trained one (a vertical split)
        alone = load_bank_only(saved, self._build_party(self.table), run_id=self.config.output.run_id) \
            if saved.is_file() and self.table is not None else None
        fallback = score_unknown(alone, scored.table, id_column=d.id_column, scored=proba)
        out = pd.DataFrame({
            d.id_column: wanted,
            "probability": [proba.get(i, fallback.get(i)) for i in wanted],
            "model": [which_model(i, split=proba, bank_only=fallback) for i in wanted],
            "status": ["scored" if i in proba else ("unknown to a partner" if i in own else f"unknown to {self.name}")
                       for i in wanted],
        })
        path = job.folder / "predictions.csv"
        write_atomic(path, out.to_csv(index=False).encode())
        counts = out["status"].value_counts().to_dict()
        summary["counts"] = {k: int(v) for k, v in counts.items()}
        summary["models"] = {k or "none": int(v) for k, v in out["model"].value_counts().to_dict().items()}
        job.finish()
        self._write_json("predict.json", summary, folder=job.folder)  # written last: the job is done
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
            last = self._resume_epoch(folder, restore)
        elif folder.exists():
            for stale in folder.glob("epoch-*.npz"):
                stale.unlink()
        return last, restore, save

    def _resume_epoch(self, folder: Path, restore: Any) -> int:
        """The newest checkpoint here that is readable (an unreadable one, e.g. truncated by a crash, is passed over
        and said so); the coordinator then resumes from the newest epoch every party holds (the oldest of theirs)."""
        found = sorted(folder.glob("epoch-*.npz"), reverse=True)
        if not found:
            raise CheckpointError(f"{self.name}: --resume given but no checkpoint in {folder}; start without it")
        skipped: list[str] = []
        for path in found:
            epoch = int(path.stem.split("-")[1])
            try:
                restore(epoch)  # fails early on a checkpoint of another run or party
            except UnreadableCheckpoint as exc:
                skipped.append(f"{path.name} ({exc})")
                continue
            if skipped:
                note = (f"{self.name}: --resume passes over the unreadable {'; '.join(skipped)} and resumes from "
                        f"{path.name} (after epoch {epoch}), unless a partner holds only an earlier one")
                log.warning("%s", note)
                print(f"vsplit: warning: {note}", file=sys.stderr)
            return epoch
        raise CheckpointError(f"{self.name}: --resume given but no checkpoint in {folder} is readable: "
                              f"{'; '.join(skipped)}; start without --resume")

    def save_model(self) -> Path:
        """Write this party's own model parts (and its preprocessing) to ``model.npz``; nothing of a peer's."""
        party = self.party
        width = party.task_width if isinstance(party, LabelParty) else 1
        state: dict[str, Any] = {
            "party": self.name, "role": self.role, "settings": self._settings().__dict__,
            "topology": self.topology.view_fingerprint(self.name),
            "segments": {seg: m.state_dict() for seg, m in party.modules_for(self.topology, task_width=width).items()},
        }
        if not isinstance(party, ComputeParty):
            state["feature_columns"] = party.feature_columns
            state["id_column"] = party.id_column
            if party.preprocessor is not None:
                state["preprocessor"] = party.preprocessor.state()
        if isinstance(party, LabelParty):
            state["label"] = party.label
            state["task"] = party.task.name
            state["label_info"] = {k: _jsonable(v) for k, v in party.label_info.items()}
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
        common["topology"] = self.topology.kind
        prep = getattr(self.party, "preprocessor", None)
        if prep is not None:  # this party's own columns: the type each was given, and why
            common["columns"] = prep.column_types()
        binary = isinstance(self.party, LabelParty) and self.party.task.name == "binary"
        if not binary or scored is None or result.test is None:
            extra = {"metrics": result.test, "history": result.history} if result.test is not None else {}
            if result.test is None and result.history:  # no test set: the validation history is the quality section
                extra = {"history": result.history, "best_epoch": result.best_epoch,
                         "monitor": self.config.train.monitor}
            return write_partner_report(self.folder, {**common, "communication": result.comm, "psi": result.psi,
                                                      **extra})
        assert isinstance(self.party, LabelParty) and scored.proba is not None
        y = self.party.task.encode_with(scored.table[self.party.label], self.party.label_info).numpy()[scored.rows]
        aucs = {"split": result.test["auc"], **{k: v["auc"] for k, v in result.baselines.items()}}
        plots = write_plots(self.folder, y=y, proba=scored.proba, history=result.history, aucs=aucs)
        from vsplit.report.credit_view import credit_section

        credit = credit_section(self.folder, y=y, proba=scored.proba, coverage=self.coverage, rows=scored.rows,
                                seed=self.config.train.seed)
        plots.update(credit.pop("plots"))
        report = {**common, "metrics": result.test, "baselines": result.baselines, "history": result.history,
                  "best_epoch": result.best_epoch, "monitor": self.config.train.monitor,
                  "warnings": training_warnings(result.history, result.best_epoch, result.baselines), "psi": result.psi,
                  "communication": {self.name: {"sent": result.comm["sent"], "received": result.comm["received"]}},
                  "plots": plots, **credit}
        return write_label_report(self.folder, report)

    def _write_json(self, name: str, payload: Any, *, folder: Path | None = None) -> Path:
        path = (folder or self.folder) / name
        write_atomic(path, (strict_json.dumps(payload, indent=2, default=_jsonable) + "\n").encode())
        return path


def chosen_record(history: list[dict[str, Any]], best_epoch: int | None) -> dict[str, Any] | None:
    """The history record of the epoch whose weights were kept (``None`` if there is none)."""
    return next((h for h in history if h.get("epoch") == best_epoch), None)


def training_warnings(history: list[dict[str, Any]], best_epoch: int | None,
                      baselines: Mapping[str, Any]) -> list[str]:
    """Plain-language warnings about the chosen epoch, for the report.

    Example:
        >>> training_warnings([{"epoch": 0, "val_loss": 0.64}], 0, {"label_party_only": {"val_loss": 0.31}})[0][:60]
        'The chosen epoch (1) has a validation loss of 0.6400, worse '
    """
    chosen = chosen_record(history, best_epoch)
    alone = baselines.get("label_party_only", {}).get("val_loss")
    if chosen is None or alone is None or "val_loss" not in chosen or not chosen["val_loss"] > alone:
        return []
    return [f"The chosen epoch ({chosen['epoch'] + 1}) has a validation loss of {chosen['val_loss']:.4f}, worse than "
            f"the bank alone's {alone:.4f} (on its own validation rows): the split's probabilities may be poorly "
            "fitted. Check the history below; try train.monitor = \"val_loss\", more epochs or a larger patience."]


def evaluate_labels(party: LabelParty, table: pd.DataFrame, rows: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """Metrics of ``proba`` (the task's predictions) against the label party's own labels of ``rows``."""
    y = party.task.encode_with(table[party.label], party.label_info).numpy()[rows]
    return party.task.metrics(y, proba)


def psi_summary(alignment: Any) -> dict[str, Any]:
    stats = alignment.stats
    return {"rows": stats.rows, "size": stats.size, "peer_sizes": dict(stats.peer_sizes),
            "intersection": stats.intersection, "seconds": stats.seconds, "bytes_sent": stats.bytes_sent,
            "points_sent": stats.points_sent, "resumed_buckets": dict(stats.resumed)}


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
