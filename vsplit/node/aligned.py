"""A party of a split whose parties train on the same aligned rows in every step: vertical, vanilla, U-shaped.

Theory of operation. :class:`AlignedNode` reads the party's own table, builds its :class:`~vsplit.party.LabelParty`,
:class:`~vsplit.party.FeatureParty` or :class:`~vsplit.party.ComputeParty`, and its session (driven by
:class:`~vsplit.node.node.PartyNode` over one pump) runs the same sans-IO machines the in-process runtime uses: PSI to
align the customers, then split training (with a checkpoint at every epoch end), then, if a test table is configured,
PSI and scoring on it. The label party then scores the baselines it can compute alone and writes its report.

The session id is derived from ``output.run_id``, which every organization sets to the same value: frames of another
run are refused. Same seeds give the same model here as in one process (``tests/test_run_tls.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from vsplit.app.local import run_sessions
from vsplit.app.session import PsiSettings, Schedule, score_session, train_session
from vsplit.config import PartyConfig, resolve
from vsplit.config.recipe import recipe_settings
from vsplit.config.topology import topology_of
from vsplit.data.parquet_table import open_table
from vsplit.data.sources import about_file, read_table
from vsplit.data.tables import all_ids
from vsplit.errors import CheckpointError, ConfigError
from vsplit.models.recipe import BATCH_SIZE, network_numeric, resolve_monitor
from vsplit.models.secret import init_seed
from vsplit.models.seeds import derive_seed, network_seed
from vsplit.node.node import PartyNode, session_id
from vsplit.node.outputs import Scores, jsonable
from vsplit.party import ComputeParty, FeatureParty, LabelParty, ModelSettings, trained_architecture
from vsplit.protocol.training.hooks import TrainingHooks
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, save_checkpoint
from vsplit.runtime.progress import EpochClock, TqdmProgress
from vsplit.topology.graph import Topology
from vsplit.transport.channel import Channel

log = logging.getLogger(__name__)


def model_settings(config: PartyConfig) -> ModelSettings:
    """The model, optimizer, preprocessing and codec settings of ``config``'s party: each :class:`ModelSettings`
    field from the one key of its ``[model]``, ``[train]``, ``[data]`` or ``[network]`` section of the same name."""
    keys = {k: v for part in (config.model, config.train, config.data, config.network) for k, v in vars(part).items()}
    named = {f.name: keys[f.name] for f in dataclasses.fields(ModelSettings) if f.name in keys}
    return ModelSettings(**{**named, **recipe_settings(config)})


@dataclass
class Scored:
    """A scored table: its IDs, the rows every party knows (in the agreed order) and, at the label party, scores."""

    table: pd.DataFrame
    ids: np.ndarray
    rows: np.ndarray
    proba: np.ndarray | None
    psi: dict[str, Any]
    #: a bag at the label party: each network's predictions (``proba`` is their mean), for the ensemble's node
    each: list[np.ndarray] | None = None


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
    #: a bag (``train.networks`` > 1): each network's seed, chosen epoch and epochs run (``history`` is the first's)
    networks: list[dict[str, Any]] = field(default_factory=list)


class AlignedNode(PartyNode, kinds=("vertical", "vanilla", "u_shaped")):
    """Runs one party of a vertical, vanilla or U-shaped split, as configured by ``config``."""

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        super().__init__(config, resume=resume, progress=progress)
        #: the seed of what only this party draws (initial weights, dropout, defence noise): its secret
        #: (:func:`vsplit.models.secret.init_seed`); what the parties agree on comes from ``train.seed``
        self.init_seed = init_seed(config)
        d = config.data
        reader = open_table if d.stream else read_table  # stream: the table stays in Parquet, read by batches
        self.table = None if self.role == "compute" else reader(
            resolve(config, d.path), id_column=d.id_column, features=d.features, label=d.label)
        self.detector_columns = self._detector_columns()
        with about_file(None if self.table is None else resolve(config, d.path)):
            self.party = self._build_party(self.table)
        self.topology: Topology = topology_of(config, label_has_features=getattr(self.party, "has_features", True))
        self._hooks: Any = None
        self._psi_backend: Any = None  # opened for the run by the session, from [psi] backend and workers
        self._checkpoints: tuple[int, Any, Any] = (-1, None, None)
        self.bank_only: Any = None  # the label party's own model, for customers a partner does not know
        self.batch_size_used: int | None = None  # the label party's batch: train.batch_size or fitted to the rows
        self.coverage: Any = None  # the bank-only model on the test table (vsplit.app.fallback.cover_test)
        #: the parties of networks 2..N of a bag (``train.networks``; network 1 is :attr:`party`), once trained or
        #: loaded; each built from the same table with its own seed (:func:`~vsplit.models.seeds.network_seed`)
        self.more_networks: list[LabelParty | FeatureParty | ComputeParty] = []
        self._trained: list[Any] = []  # each network's training outcome, in order

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
                               canaries=cols.get("canary_column"), seed=derive_seed(self.init_seed, "detectors"),
                               lr=t.lr, batch_size=t.batch_size or BATCH_SIZE)

    def _settings(self) -> ModelSettings:
        return model_settings(self.config)

    def monitor(self) -> str:
        """What early stopping watched (``train.monitor``, ``"auto"`` resolved for this config's task)."""
        return resolve_monitor(self.config.train.monitor, self.config.topology.task)

    def _build_party(self, table: Any, *, trained: Mapping[str, Any] | None = None, network: int = 0
                     ) -> LabelParty | FeatureParty | ComputeParty:
        """This party's data and models from ``table``; ``trained``: the architecture a saved model was trained with
        (:func:`~vsplit.party.trained_architecture`), which the config's defaults may no longer give (the default
        recipe changed, or ``model.numeric_embedding = "auto"`` picks otherwise now the table streams); ``network``:
        which network of a bag (seeded ``train.seed + 1000 * network``, its init ``init_seed + 1000 * network``, and
        ``model.numeric_embedding = "auto"`` taking piecewise-linear and periodic in turn, as
        :class:`vsplit.bagging.SplitBag` does)."""
        d = self.config.data
        settings = self._settings()
        numeric = network_numeric(settings.numeric_embedding, network, streamed=bool(d.stream))
        settings = dataclasses.replace(settings, **{"numeric_embedding": numeric, **(trained or {})})
        categorical = list(d.categorical) if d.categorical is not None else None
        seeds = {"seed": network_seed(self.config.train.seed, network),
                 "init_seed": network_seed(self.init_seed, network)}
        if self.role == "compute" or table is None:
            return ComputeParty(self.name, settings=settings, **seeds)
        if self.role == "label":
            assert d.label is not None
            return LabelParty(self.name, table, label=d.label, id_column=d.id_column, positive_label=d.positive_label,
                              settings=settings, categorical=categorical, task=self.config.topology.task, **seeds)
        return FeatureParty(self.name, table, id_column=d.id_column, settings=settings, categorical=categorical,
                            **seeds)

    @property
    def networks(self) -> list[LabelParty | FeatureParty | ComputeParty]:
        """The party of each network this node trained or loaded (one, unless a bag: ``train.networks``)."""
        return [self.party, *self.more_networks]

    @property
    def peers(self) -> list[str]:
        return list(self.config.network.peers)

    @property
    def feature_columns(self) -> list[str] | None:
        return None if isinstance(self.party, ComputeParty) else self.party.feature_columns

    # -- the run -----------------------------------------------------------------------------------------------------
    def pump(self, channels: Mapping[str, Channel], *, purpose: str = "", **options: Any) -> Any:
        """As :meth:`PartyNode.pump`; a bag's pump holds a peer's frames for the stage they belong to (a partner
        that has sent a network's last scoring chunks already sends the next network's Ready)."""
        bag = max(self.config.train.networks, len(self.networks))
        return super().pump(channels, purpose=purpose, **({"hold": True} if bag > 1 else {}), **options)

    def before_connect(self) -> None:
        networks = self.config.train.networks
        if networks > 1 and self.resume:
            raise CheckpointError(f"{self.name}: --resume does not resume a bag of networks yet (train.networks = "
                                  f"{networks}): start every party again without --resume (all {networks} networks "
                                  "are trained again), or train networks = 1 to resume from epoch checkpoints")
        self._checkpoints = self._checkpointing()  # a bad --resume fails before any peer is reached
        if networks > 1:  # a bag keeps no epoch checkpoints: --resume refuses it (above)
            self._checkpoints = (-1, None, None)

    def session(self) -> Any:
        """PSI, training and (if configured) the test table's PSI and scoring, as one session; its outcome is
        ``(training outcome, scored test table or None)``."""
        self._psi_backend = self.open_psi_backend()
        try:
            outcome = yield from self.train_networks()
            scored = None
            if outcome.extra["machine"].plan.then_score:  # the label party has a test table: every party scores it
                test, source = self._test_table_to_score()
                scored = yield from self.score_session(test, source=source, psi_stage="test psi")
            elif self.role == "feature" and self.config.data.test_path:
                log.warning("%s: data.test_path is not scored: the label party has no data.test_path, and it alone "
                            "holds the test labels; set it there to score a test table", self.name)
            return outcome, scored
        finally:
            if self._psi_backend is not None:
                self._psi_backend.close()
                self._psi_backend = None

    def train_networks(self, rows: np.ndarray | None = None) -> Any:
        """Train every network of this party (a bag: the same rows, each its own seed), then ``model.npz``; ``rows``:
        already aligned (the ensemble's node, :mod:`vsplit.node.ensemble`). The first network's training outcome."""
        outcome = yield from self._train_session(rows=rows)
        self._trained, self.more_networks = [outcome], []
        for network in range(1, self.config.train.networks):
            party = self._build_party(self.table, network=network)
            self.more_networks.append(party)
            self._trained.append((yield from self._train_session(party, network=network, rows=outcome.rows)))
        self.save_model()
        return outcome

    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> NodeResult:
        """This party's result (and, at the label party, its test metrics and baselines), report and result.json."""
        training, scored = outcome
        seconds = dict(seconds)
        self.bank_only = self.train_fallback()  # after the session, so that no partner waits for it
        if "score" in seconds or "test psi" in seconds:  # the test table's alignment and scoring
            seconds["score"] = seconds.pop("test psi", 0.0) + seconds.pop("score", 0.0)
        result = NodeResult(party=self.name, role=self.role, psi={}, comm=comm)
        if isinstance(self.party, LabelParty):
            result.history, result.best_epoch = training.result.history, training.result.best_epoch
            plan = getattr(training.extra.get("machine"), "plan", None)
            self.batch_size_used = getattr(plan, "batch_size", None)  # train.batch_size, or the one fitted to the rows
            result.epoch_seconds = [round(x, 4) for x in training.extra["clock"].seconds]
            if len(self._trained) > 1:
                result.networks = [{"network": i, "seed": network_seed(self.config.train.seed, i),
                                    "best_epoch": out.result.best_epoch, "epochs_run": len(out.result.history)}
                                   for i, out in enumerate(self._trained)]
        result.psi = {"train": psi_summary(training.alignment)} if training.alignment is not None else {}
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
        self.write_json("result.json", result.__dict__)
        self._record_for_serving(training.alignment)
        self.write_report(result, scored)
        self.forget_psi_progress()
        return result

    def _record_for_serving(self, alignment: Any) -> None:
        """``peers.json`` and the label party's training intersection, for ``vsplit serve``
        (:mod:`vsplit.node.record`); a run that cannot record them still trains (serving then says so)."""
        from vsplit.errors import VsplitError
        from vsplit.node.record import record_run

        try:
            record_run(self, alignment)
        except (VsplitError, OSError) as exc:
            log.warning("%s: not recorded for serving (%s)", self.name, exc)

    def _test_table(self) -> pd.DataFrame | None:
        data = self.config.data
        if not data.test_path or self.role == "compute":  # "" (e.g. --set data.test_path="") means none
            return None
        return read_table(resolve(self.config, data.test_path), id_column=data.id_column, features=data.features,
                          label=data.label, option="data.test_path")

    def _test_table_to_score(self) -> tuple[pd.DataFrame | None, Path | None]:
        """The table this party scores the label party's test customers from, and its file: its own
        ``data.test_path``, or else (a partner without one) its training table, which holds the customers it knows;
        the test PSI then finds which of the test customers those are (the others get the bank's own model)."""
        data = self.config.data
        if self.role == "compute":
            return None, None
        if data.test_path or self.role == "label":
            return self._test_table(), resolve(self.config, data.test_path)
        log.info("%s: no data.test_path; the label party's test customers are scored from data.path", self.name)
        path = resolve(self.config, data.path)
        table = self.table if isinstance(self.table, pd.DataFrame) else read_table(
            path, id_column=data.id_column, features=self.feature_columns or None)  # streamed: read it whole now
        return table, path

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

    def schedule(self, *, then_score: bool = False, network: int = 0) -> Schedule:
        t = self.config.train
        return Schedule(epochs=t.epochs, batch_size=t.batch_size, validation_fraction=t.validation_fraction,
                        patience=t.patience, monitor=t.monitor, seed=network_seed(t.seed, network),
                        then_score=then_score,
                        window=t.pipeline_window, local_steps=t.local_steps, min_class_rows=t.min_class_rows,
                        min_steps=t.min_steps)

    # -- scoring -----------------------------------------------------------------------------------------------------
    def score_session(self, table: pd.DataFrame | None, *, psi_state: Path | None = None,
                      source: Path | None = None, psi_stage: str = "psi") -> Any:
        """Align ``table``'s customers with the peers by PSI (where the split needs it) and score them jointly, as a
        session; only the label party gets scores. A compute party has no table (``None``). ``psi_state``: where the
        alignment keeps its resumable progress (default: the run's ``psi-state/test``); ``source``: the file the
        table came from, named in data errors. A bag (:attr:`networks`) aligns once, scores with every network in
        turn and the label party keeps the mean of their predictions."""
        parties = self.networks
        with about_file(source):  # each network has its own preprocessing (fitted with its own seed)
            prepared = [p.prepare(table) if table is not None else None for p in parties]
        hooks = self._hooks if self._hooks is not None else self.defense_hooks()
        psi = self.psi_settings("test", state_dir=psi_state)
        bag = len(parties)
        outcome = yield from score_session(self.party, self.topology, prepared[0], psi=psi, hooks=hooks,
                                           psi_stage=psi_stage, bag=(0, bag))
        results = [outcome.result]
        for network in range(1, bag):
            more = yield from score_session(parties[network], self.topology, prepared[network], hooks=hooks,
                                            rows=outcome.rows, bag=(network, bag))
            results.append(more.result)
        ids = prepared[0][0] if prepared[0] is not None else np.zeros(0, dtype=object)
        rows = outcome.rows if outcome.rows is not None else np.zeros(0, dtype=np.int64)
        proba = np.mean(results, axis=0) if isinstance(self.party, LabelParty) else None
        psi = psi_summary(outcome.alignment) if outcome.alignment is not None else {}
        return Scored(table=table if table is not None else pd.DataFrame(), ids=ids, rows=rows, proba=proba, psi=psi,
                      each=[np.asarray(r) for r in results] if proba is not None else None)

    def label_party_only(self, test: pd.DataFrame, rows: np.ndarray) -> dict[str, float] | None:
        """The baseline the label party can compute alone, scored on the same rows: its own columns alone
        (vertical), or the same network trained without the server (U-shaped); none where it has no features."""
        assert isinstance(self.party, LabelParty)
        if self.coverage is not None:  # vertical: the bank-only fallback is this baseline, already trained and scored
            metrics = evaluate_labels(self.party, test, rows, self.coverage.proba[rows])
            chosen = chosen_record(self.bank_only.history, self.bank_only.best_epoch)
            network = self.bank_only.chosen == "network" and chosen is not None and "val_loss" in chosen
            return {**metrics, "n_scored": len(rows), **({"val_loss": chosen["val_loss"]} if network else {}),
                    **self.bank_only.describe()}  # which bank model, its validation AUCs, any warning
        alone = self._build_party(self.table)
        assert isinstance(alone, LabelParty)
        if not alone.has_features:
            return None
        if self.topology.kind == "u_shaped":
            run = self.topology.placed_on(self.name)
            server = ComputeParty(self.topology.segment("middle").owner, settings=self._settings(),
                                  seed=self.config.train.seed, init_seed=self.init_seed)
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

    def fallback_scores(self, table: pd.DataFrame, scored: Mapping[str, Any]) -> dict[str, Any]:
        """(label party) The bank-only model's scores of ``table``'s customers the split did not score (``scored``:
        ID -> the split's score), if the run trained that model (``fallback.npz``, a vertical split); else none."""
        from vsplit.app.fallback import FILE, load_bank_only, score_unknown

        saved = self.folder / FILE
        alone = load_bank_only(saved, lambda trained: self._build_party(self.table, trained=trained),
                               run_id=self.config.output.run_id, party=self.name) \
            if saved.is_file() and self.table is not None else None
        return score_unknown(alone, table, id_column=self.config.data.id_column, scored=scored)

    def defense_hooks(self, *, network: int = 0) -> Any:
        """The training hooks of this party's configured defenses (``privacy.defenses``), for network ``network``
        of a bag."""
        texts = self.config.privacy.defenses
        if not texts or self.role == "compute":
            return TrainingHooks()
        from vsplit.privacy.defenses import make_defense

        defense = make_defense("+".join(texts))
        partners = self.peers if self.role == "label" else [self.name]
        return defense.hooks(feature_parties=partners,  # its noise from this party's secret: no peer can remove it
                             seed=derive_seed(network_seed(self.init_seed, network), "defense"))

    def _train_session(self, party: Any = None, *, network: int = 0, rows: np.ndarray | None = None) -> Any:
        """Train network ``network`` of this party (``party``, default :attr:`party`); ``rows``: already aligned."""
        networks = self.config.train.networks
        clock = EpochClock()
        label = f" (network {network + 1} of {networks})" if networks > 1 else ""
        bar = TqdmProgress(desc=f"{self.name} training{label}", disable=not self.progress)
        callbacks = [bar, clock, *([self.console] if self.console is not None else [])]
        hooks = self.defense_hooks(network=network)
        if network == 0:
            self._hooks = hooks
        detectors = self.detectors()
        if detectors is not None and self.console is not None:
            self.console.watch_detectors(detectors)
        if detectors is not None:
            from vsplit.privacy.hooks import merge_hooks

            hooks = merge_hooks(hooks, detectors.hooks())
        then_score = self.role == "label" and bool(self.config.data.test_path)
        outcome = yield from train_session(party or self.party, self.topology,
                                           schedule=self.schedule(then_score=then_score, network=network),
                                           psi=self.psi_settings(), hooks=hooks, callbacks=callbacks,
                                           checkpointing=self._checkpoints, prepare=detectors and detectors.prepare,
                                           rows=rows, bag=(network, networks))
        bar.close()
        outcome.extra["clock"] = clock
        return outcome

    # -- joint prediction with saved model parts ---------------------------------------------------------------------
    def load_model(self) -> None:
        """Load this party's own saved model parts (and preprocessing) from ``model.npz``."""
        state = self.load_parts(None, topology=self.topology.view_fingerprint(self.name))
        with interpreting(self.folder / "model.npz"):
            trained = trained_architecture(state)
            now = {**{k: getattr(self.party.settings, k) for k in trained},
                   "numeric_embedding": getattr(self.party, "numeric_kind", trained.get("numeric_embedding"))}
            if any(now[k] != v for k, v in trained.items()):  # trained under other defaults, or "auto" chose otherwise
                self.party = self._build_party(self.table, trained=trained)
            self._restore(self.party, state)
            bag = state.get("bag") or []
            if state.get("networks", 1) != len(bag) + 1:
                raise ValueError(f"it records {state.get('networks')} networks but holds {len(bag) + 1}")
            self.more_networks = [self._load_network(network, entry, trained)
                                  for network, entry in enumerate(bag, start=1)]

    def _load_network(self, network: int, entry: Mapping[str, Any], trained: Mapping[str, Any]) -> Any:
        """Network ``network`` of a saved bag: built as trained (:meth:`_build_party`), its preprocessing and
        segments loaded from ``entry`` (:meth:`_network_state`)."""
        if entry.get("numeric_embedding") is not None:  # a bag's networks may differ in their embedding
            trained = {**trained, "numeric_embedding": entry["numeric_embedding"]}
        party = self._build_party(self.table, trained=trained, network=network)
        self._restore(party, entry)
        return party

    def _restore(self, party: Any, saved: Mapping[str, Any]) -> None:
        """Put a saved network's preprocessing (if it has one) and segments into ``party``."""
        if "preprocessor" in saved:
            from vsplit.data.preprocess import TablePreprocessor

            party.preprocessor = TablePreprocessor.from_state(saved["preprocessor"])
        for seg, module in self._segments(party).items():
            module.load_state_dict(saved["segments"][seg])

    def score_table(self, table: pd.DataFrame | None, *, channels: Mapping[str, Channel] | None = None,
                    peers: list[str] | None = None, psi_state: Path | None = None,
                    source: Path | None = None) -> Scores:
        """Align ``table``'s customers with the peers by PSI and score them with the saved model parts; the label
        party gets each shared customer's score (customers a partner does not know are marked so)."""
        started = time.perf_counter()
        session = self.score_session(table, psi_state=psi_state, source=source)
        scored, communication = self.exchange(session, channels=channels, peers=peers)
        out = Scores(seconds={"predict": round(time.perf_counter() - started, 3)}, communication=communication,
                     summary={"psi": scored.psi})
        if isinstance(self.party, LabelParty):
            assert scored.proba is not None
            out.ids = [str(v) for v in scored.ids]
            from vsplit.explain.calibration import calibrated

            proba = calibrated(self.folder, scored.proba)  # the label party's calibration.json, if it fitted one
            out.by_id = dict(zip([out.ids[r] for r in scored.rows], proba.tolist(), strict=True))
            out.fallback = self.fallback_scores(scored.table, out.by_id)
            from vsplit.data.unseen import unseen_in_table

            flags = unseen_in_table(self.party.preprocessor, scored.table)
            out.unseen = {i: f for i, f in zip(out.ids, flags, strict=True) if f}
        elif getattr(self.party, "preprocessor", None) is not None and scored.table is not None:
            from vsplit.data.unseen import unseen_in_table

            # a partner flags its own columns in its own outputs: the label party is not told which they are
            mine = scored.table.iloc[scored.rows]
            ids = mine[self.config.data.id_column].astype(str)
            flags = unseen_in_table(self.party.preprocessor, mine)
            out.unseen = {i: f for i, f in zip(ids, flags, strict=True) if f}
        return out

    # -- checkpoints and outputs -------------------------------------------------------------------------------------
    def _checkpointing(self) -> tuple[int, Any, Any]:
        run_id = self.config.output.run_id

        def save(state: dict[str, Any]) -> None:
            save_checkpoint(self.checkpoint_path("epoch", state["epoch"]), state, run_id=run_id, party=self.name)
            # the last three: a peer may be one behind, and its newest may be unreadable (it resumes two behind)
            for old in sorted((self.folder / "checkpoints").glob("epoch-*.npz"))[:-3]:
                old.unlink()

        def restore(epoch: int) -> dict[str, Any]:
            return load_checkpoint(self.checkpoint_path("epoch", epoch), run_id=run_id, party=self.name)

        # the coordinator then resumes from the newest epoch every party holds (the oldest of theirs)
        return self.newest_checkpoint("epoch", restore, required=True), restore, save

    def _segments(self, party: Any = None) -> dict[str, Any]:
        party = party if party is not None else self.party
        return party.modules_for(self.topology, task_width=party.task_width if isinstance(party, LabelParty) else 1)

    def save_model(self) -> Path:
        """Write this party's own model parts (and its preprocessing) to ``model.npz``; nothing of a peer's.

        A bag (``train.networks`` > 1) is the same one file, written once and atomically: the first network where a
        single network's parts are, ``networks`` (how many) and ``bag``, the list of networks 2..N, each its
        ``seed``, ``segments``, ``numeric_embedding`` and (a party with a table) ``preprocessor``."""
        party, fields = self.party, {}
        if isinstance(party, LabelParty):
            fields = {"label": party.label, "task": party.task.name,
                      "label_info": {k: jsonable(v) for k, v in party.label_info.items()}}
        bag = [self._network_state(network, other) for network, other in enumerate(self.more_networks, start=1)]
        if bag:
            fields.update(networks=len(bag) + 1, bag=bag)
        return self.save_parts(self._segments(), party, settings=self._settings().__dict__,
                               topology=self.topology.view_fingerprint(self.name),
                               numeric_embedding=getattr(party, "numeric_kind", None), **fields)

    def _network_state(self, network: int, party: Any) -> dict[str, Any]:
        """What ``model.npz`` keeps of network ``network`` (2nd onwards) of a bag: its own parts only."""
        state: dict[str, Any] = {"seed": network_seed(self.config.train.seed, network),
                                 "segments": {s: m.state_dict() for s, m in self._segments(party).items()},
                                 "numeric_embedding": getattr(party, "numeric_kind", None)}
        if getattr(party, "preprocessor", None) is not None:
            state["preprocessor"] = party.preprocessor.state()
        return state

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
                         "monitor": self.monitor()}
            return write_partner_report(self.folder, {**common, "communication": result.comm, "psi": result.psi,
                                                      **extra})
        assert isinstance(self.party, LabelParty) and scored.proba is not None
        y = self.party.task.encode_with(scored.table[self.party.label], self.party.label_info).numpy()[scored.rows]
        aucs = {"split": result.test["auc"], **{k: v["auc"] for k, v in result.baselines.items()}}
        curves = {"label_party_only": self.coverage.proba[scored.rows]} if self.coverage is not None else None
        plots = write_plots(self.folder, y=y, proba=scored.proba, history=result.history, aucs=aucs, curves=curves)
        from vsplit.report.credit_view import credit_section

        credit = credit_section(self.folder, y=y, proba=scored.proba, coverage=self.coverage, rows=scored.rows,
                                seed=self.config.train.seed)
        plots.update(credit.pop("plots"))
        report = {**common, "metrics": result.test, "baselines": result.baselines, "history": result.history,
                  "best_epoch": result.best_epoch, "monitor": self.monitor(),
                  "warnings": training_warnings(result.history, result.best_epoch, result.baselines)
                  + ([credit["bank_model"]["warning"]] if "warning" in credit.get("bank_model", {}) else []),
                  "psi": result.psi,
                  "communication": {self.name: {"sent": result.comm["sent"], "received": result.comm["received"]}},
                  "plots": plots, **credit}
        from vsplit.explain.card import run_card
        from vsplit.report.card import write_model_card

        write_model_card(self.folder, run_card(self, scored, y, result))  # model_card.md and .html
        return write_label_report(self.folder, report)


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
