"""One organization's process in a horizontal split: a client (its rows), the server, or a federated server.

Theory of operation. :class:`HorizontalNode` reads the party's config (``topology.kind = "horizontal"``, see
:mod:`vsplit.config.horizontal`), builds its side of the split, and its session (driven by
:class:`~vsplit.node.node.PartyNode` over one pump, as every topology's) runs: first the
``join`` stage (:mod:`vsplit.horizontal.join`: rows, segment digests, public keys, in a vanilla split the labels),
then the schedule's stages (:mod:`vsplit.horizontal.session`), the same generator the in-process runner drives. The
pump holds each peer's frames until the stage they belong to (``Pump(hold=True)``), so one set of mutual-TLS
channels carries every stage; in SplitFed a client whose link is lost mid-round is dropped (``drops=True``) and the
others finish the run without it. Every client builds the same initial segments: their weights are seeded by the
replicated segment's name and the clients' shared init seed (``clients.init-seed``, which the server does not hold,
:mod:`vsplit.horizontal.shared_seed`), not by the client's name; each client's dropout, and the server's segments and
dropout, come from the party's own init seed (:mod:`vsplit.models.secret`).

What each party writes to ``<output.dir>/<run_id>/<party>/``: ``model.npz`` (only its own segments, and a client's
preprocessing), ``result.json`` (schedule, losses where it holds labels, seconds per stage kind and per round, bytes
sent and received per peer, clients lost). Same seeds give the same parameters here as in one process
(``tests/test_horizontal_processes.py``).

Between organizations each party runs ``vsplit train --config party.toml``; :func:`run_in_process` runs every
party's node in one process over memory channels (the reference the process tests compare with).

Scoring (``vsplit predict``): a bank scores its own customers with its segments and the server's; the server serves
the banks (``--banks bank_1,bank_2``: only those). Each loads only its own ``model.npz``. A bank runs its bottom
segment and sends the cut activations to the server in batches (:mod:`vsplit.horizontal.predict`); in FedAvg every
bank holds the whole model and scores alone, without the server. In sequential training the final client segment is
the last bank's (its last turn): that bank scores, another is refused with an error naming it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vsplit.atomic import write_atomic
from vsplit.config import PartyConfig, resolve
from vsplit.config.horizontal import horizontal_of, settings_of
from vsplit.data.sources import read_table
from vsplit.errors import CheckpointError, ConfigError
from vsplit.horizontal.join import Join, JoinClient, JoinFederated, JoinServer
from vsplit.horizontal.schedule import AVERAGE, HANDOFF, TRAIN, compile_schedule, stage_order
from vsplit.horizontal.shared_seed import clients_init_seed
from vsplit.models.secret import init_seed
from vsplit.models.tasks import make_task
from vsplit.node.aligned import model_settings
from vsplit.node.node import PartyNode, session_id
from vsplit.node.outputs import Scores
from vsplit.party import ComputeParty, LabelParty, ModelSettings
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, save_checkpoint
from vsplit.transport.channel import Channel

log = logging.getLogger(__name__)
JOIN = "join"
#: Rows a bank sends per request.
BATCH_ROWS = 4096


def order(stage: str) -> int:
    """Sort key of a horizontal run's stage names: the join first, then the schedule's stages."""
    return -1 if stage == JOIN else stage_order(stage)


@dataclass
class HorizontalResult:
    """What one party of a horizontal run learned."""

    party: str
    role: str
    schedule: str
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    round_seconds: list[float] = field(default_factory=list)
    comm: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    #: the round this run started at (0, or after --resume the first round not every party had finished)
    start_round: int = 0
    #: whether the averages went through secure aggregation
    secure_aggregation: bool = False
    #: clients that were lost and came back (the server's and federated server's view; a returned client: itself),
    #: with the round they trained again from
    readmitted: dict[str, int] = field(default_factory=dict)


class HorizontalNode(PartyNode, kinds=("horizontal",)):
    """Runs one party of a horizontal split, as configured by ``config``."""

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        super().__init__(config, resume=resume, progress=progress)
        self.h = horizontal_of(config)
        self.settings = settings_of(config)
        t = config.topology
        self.is_client = self.name in t.clients
        self.is_server = self.name == t.server
        self.task = make_task(t.task)
        self.party: LabelParty | None = None
        #: the seed of what only this party draws (a client's dropout; the server's segments and dropout): its own
        #: init seed; None where it draws nothing (a federated server, the server in FedAvg)
        self.init_seed: int | None = None
        if self.is_client or (self.is_server and self.settings.kind != "fedavg"):
            self.init_seed = init_seed(config)
        if self.is_client:
            d = config.data
            table = read_table(resolve(config, d.path), id_column=d.id_column, features=d.features, label=d.label)
            assert d.label is not None
            # named after the replicated segment owner and seeded by the clients' shared secret: every client's
            # initial weights are the same, and the server cannot rebuild them
            self.party = LabelParty(self.h.client, table, label=d.label, id_column=d.id_column,
                                    positive_label=d.positive_label, settings=self.model_settings(),
                                    categorical=list(d.categorical) if d.categorical is not None else None,
                                    seed=config.train.seed, init_seed=clients_init_seed(config), task=self.task)
        self.modules = self._modules()
        self.outcome: Any = None
        self.result: HorizontalResult | None = None
        self.rejoined_at: int | None = None
        #: the last round this party can resume from (-1: none), read by :meth:`before_connect` for a training run
        self.latest = -1

    def before_connect(self) -> None:
        self.latest = self._checkpoints()  # a bad checkpoint fails before any peer is reached

    @property
    def readmits(self) -> bool:  # type: ignore[override]
        """The server and a federated server take back a client that was lost (SplitFed, FedAvg)."""
        return self.settings.kind != "sequential" and not self.is_client

    @property
    def patient(self) -> bool:
        """A client restarted with --resume waits until the server has given its earlier process up."""
        return self.resume and self.settings.kind != "sequential"

    @property
    def feature_columns(self) -> list[str] | None:
        return self.party.feature_columns if self.party is not None else None

    # -- round checkpoints -------------------------------------------------------------------------------------------
    def _checkpoints(self) -> int:
        """The last round this party can resume from (-1: none, and then this party starts afresh, and so the run
        does); without --resume, stale checkpoints go."""
        return self.newest_checkpoint("round", self.restore, required=False)

    def save_round(self, round_: int, snapshot: Mapping[str, np.ndarray]) -> None:
        """Write this party's state at the end of ``round_`` (atomically; all rounds are kept: a client that sat
        out rounds may be asked for an earlier one, and they hold only its own segments)."""
        state = {"round": round_, **self.fingerprint(), "arrays": dict(snapshot)}
        save_checkpoint(self.checkpoint_path("round", round_), state, run_id=self.config.output.run_id,
                        party=self.name)

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint or model of this party is checked against: its clients and server, and its schedule."""
        return {"horizontal": self.h.fingerprint(), "schedule": self.settings.describe()}

    def restore(self, round_: int) -> dict[str, np.ndarray]:
        """This party's snapshot at the end of ``round_``, checked to belong to this run, party and set-up."""
        path = self.checkpoint_path("round", round_)
        if not path.is_file():
            raise CheckpointError(f"{self.name}: the run resumes at round {round_ + 1}, but {path} is missing; "
                                  "restart every party without --resume")
        state = load_checkpoint(path, run_id=self.config.output.run_id, party=self.name)
        if any(state.get(k) != v for k, v in self.fingerprint().items()):
            raise CheckpointError(f"{self.name}: {path} was written with other clients, server or schedule "
                                  f"({state.get('schedule')}); restart without --resume")
        with interpreting(path, fix="restart every party without --resume"):
            return {k: np.asarray(v) for k, v in state["arrays"].items()}

    def keeper(self, start_round: int, *, rejoin: bool = False) -> Any:
        """Round checkpoints from ``start_round`` on; ``rejoin``: a client readmitted after it was lost restores its
        own latest round (it catches up with the others through the average, :mod:`vsplit.horizontal.readmit`)."""
        from vsplit.horizontal.rounds import RoundKeeper

        if rejoin:
            restored = self.restore(self.latest) if self.latest >= 0 else None
        else:
            restored = self.restore(start_round - 1) if start_round > 0 and (self.party or self.is_server) else None
        return RoundKeeper(start_round=start_round, restored=restored, save=self.save_round)

    def run_key(self) -> Any:
        """The X25519 run key this client signs at the join: new for a fresh run, kept (mode 0600, atomically) under
        its run folder and reloaded with --resume, so that a client restarted after it was lost joins again with the
        key the other clients checked."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

        from vsplit.horizontal.sealed import new_key

        path = self.folder / "run-key.x25519"
        if self.resume and path.is_file():
            raw = path.read_bytes()
            if len(raw) != 32:
                raise CheckpointError(f"{self.name}: {path} is not a 32-byte X25519 key; restart without --resume")
            return X25519PrivateKey.from_private_bytes(raw)
        key = new_key()
        os.makedirs(self.folder, exist_ok=True)
        write_atomic(path, key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                             serialization.NoEncryption()), mode=0o600)
        return key

    def gate(self, *, joins: Mapping[str, Any] | None = None, roster: Any) -> Any:
        """How this server (``joins``: what every client joined with) or federated server takes back a client
        that was lost (SplitFed, FedAvg); None for sequential training, which stops instead."""
        from vsplit.horizontal.readmit import Readmission, federated_take, server_take
        from vsplit.horizontal.session import Gate

        if self.settings.kind == "sequential":
            return None
        fed = self.settings.federated_server
        averages_only = (self.settings.kind == "fedavg" and self.is_server) or (fed is not None and self.name == fed)
        book = Readmission(gone=set(), rounds=self.settings.rounds, joins_now=averages_only)
        if joins is not None:
            def same_join(client: str, msg: Any) -> str | None:
                from vsplit.horizontal.join import Join

                first = joins[client]
                if not isinstance(msg, Join):
                    return f"its first message is a {type(msg).__name__}, not its join"
                for what in ("rows", "schema", "state_size", "public"):
                    if getattr(msg, what) != getattr(first, what):
                        return f"its {what} differs from the run's (restart it with --resume, same data and config)"
                if not np.array_equal(msg.labels, first.labels):
                    return "its labels differ from the run's"
                return None

            def readmit_roster(start: int) -> Any:
                return dataclasses.replace(roster, start_round=start, readmitted=1)

            return Gate(book, server_take(book, check=same_join, roster=readmit_roster, log=log.warning))

        def same_roster(client: str, msg: Any) -> str | None:
            from vsplit.horizontal.join import Roster

            if not isinstance(msg, Roster) or msg.readmitted != 1:
                return f"its first message is a {type(msg).__name__}, not the server's roster readmitting it"
            same = (msg.names, msg.publics, msg.state_size) == (roster.names, roster.publics, roster.state_size)
            if not same or not all(np.array_equal(getattr(msg, f), getattr(roster, f))
                                   for f in ("rows", "signatures", "signature_sizes")):
                return "the roster it forwarded is not the run's"
            return None

        return Gate(book, federated_take(book, check=same_roster, log=log.warning))

    # -- building ----------------------------------------------------------------------------------------------------
    def model_settings(self) -> ModelSettings:
        return model_settings(self.config)

    def _modules(self) -> dict[str, torch.nn.Module]:
        base = self.h.base
        if self.party is not None:
            topology = base.placed_on(self.h.client) if self.settings.kind == "fedavg" else base
            return self.party.modules_for(topology)
        if self.is_server and self.settings.kind != "fedavg":
            server = ComputeParty(self.name, settings=self.model_settings(), seed=self.config.train.seed,
                                  init_seed=self.init_seed)
            return server.modules_for(base)
        return {}

    def _optimizer(self) -> Any:
        helper = self.party or ComputeParty(self.name, settings=self.model_settings(), seed=self.config.train.seed)
        return helper.optimizer

    def schema(self) -> str:
        """A digest of what every client must share: columns, category values (their codes follow from them),
        segment shapes and initial weights (the clients' shared init seed), task. The server sees only the digest:
        testing a guess of the initial weights against it takes the 62-bit seed."""
        assert self.party is not None
        pre = self.party.preprocessor
        states = {f"{s}/{k}": v for s, m in self.modules.items() for k, v in m.state_dict().items()}
        shapes = {k: list(v.shape) for k, v in states.items()}
        weights = hashlib.sha256()
        for key in sorted(states):
            weights.update(key.encode() + states[key].detach().cpu().contiguous().numpy().tobytes())
        text = json.dumps({"columns": self.party.feature_columns, "shapes": shapes, "init": weights.hexdigest(),
                           "categories": pre.categories_ if pre is not None else {},
                           "n_numeric": pre.n_numeric if pre is not None else 0, "task": self.task.name},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    # -- the session -------------------------------------------------------------------------------------------------
    def session(self) -> Any:
        """This party's whole run as a generator of ``(stage, machine)`` (see :mod:`vsplit.app.session`)."""
        from vsplit.horizontal.sealed import public_bytes
        from vsplit.horizontal.session import (
            ClientSide,
            HandoffKeys,
            ServerSide,
            client_session,
            federated_session,
            server_session,
            state_size,
        )

        h, settings, clients = self.h, self.settings, list(self.h.clients)
        fed = settings.federated_server
        run_id = self.config.output.run_id
        context = run_id.encode()
        if self.party is not None:
            key = self.run_key()
            labels = self.party.labels.numpy() if h.labels_at_server and settings.kind != "fedavg" else None
            signature = self.sign(public_bytes(key))
            join = Join(rows=len(self.party.ids), schema=self.schema(), resume_round=self.latest,
                        public=public_bytes(key).hex(),
                        labels=np.asarray(labels if labels is not None else np.zeros(0), np.float32),
                        signature=np.frombuffer(signature, np.uint8).copy(),
                        state_size=state_size(self.own_modules(), settings))
            roster = yield JOIN, JoinClient(join, server=h.server, forward_to=[fed] if fed else [])
            if settings.sealed or settings.secure(len(clients)):  # the keys seal hand-offs or seed the masks
                self.check_keys(roster)
            rows = roster.rows_of()
            source = next(s.name for s in h.base.sources_of(h.client))
            own_labels = None if labels is not None else self.party.labels
            assert self.party.inputs is not None
            side = ClientSide(self.modules, {source: self.party.inputs}, self._optimizer(), labels=own_labels,
                              task=self.task)
            keys = HandoffKeys(key, roster.publics_of(), context=context)
            rejoin = bool(roster.readmitted)
            keeper = self.keeper(roster.start_round, rejoin=rejoin)
            self.rejoined_at = roster.start_round if rejoin else None
            outcome = yield from client_session(self.name, h, settings, rows, side, keys, keeper, run_id=run_id,
                                                rejoin=rejoin, rng_seed=self.init_seed)
        elif self.is_server:
            roster, joins = yield JOIN, JoinServer(clients, own_round=self.latest)
            rows = roster.rows_of()
            server_side = None
            if settings.kind != "fedavg":
                labels = {c: torch.from_numpy(j.labels.copy()) for c, j in joins.items()} if h.labels_at_server \
                    else None
                server_side = ServerSide(self.modules, self._optimizer(), labels=labels, task=self.task)
            outcome = yield from server_session(h, settings, rows, server_side, self.keeper(roster.start_round),
                                                run_id=run_id, state_size=roster.state_size,
                                                gate=self.gate(joins=joins, roster=roster),
                                                rng_seed=self.init_seed)
        else:
            roster = yield JOIN, JoinFederated(clients)
            rows = roster.rows_of()
            outcome = yield from federated_session(self.name, h, settings, rows, self.keeper(roster.start_round),
                                                   run_id=run_id, state_size=roster.state_size,
                                                   gate=self.gate(roster=roster))
        self.rows, self.start_round = rows, roster.start_round
        return outcome

    def own_modules(self) -> dict[str, torch.nn.Module]:
        """This client's segments that averages and hand-offs move (FedAvg: all of them)."""
        if self.settings.kind == "fedavg":
            return dict(self.modules)
        return {s: self.modules[s] for s in self.h.client_segments}

    def sign(self, public: bytes) -> bytes:
        """This client's signature over its hand-off key, with its TLS identity's private key."""
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        from vsplit.horizontal.keysig import sign_key

        key = load_pem_private_key(resolve(self.config, self.config.network.key).read_bytes(), password=None)
        return sign_key(key, run_id=self.config.output.run_id, client=self.name, public=public)

    def check_keys(self, roster: Any) -> None:
        """Every other client's hand-off key in ``roster`` is signed by that client's pinned certificate."""
        from vsplit.horizontal.keysig import verify_key
        from vsplit.transport.identity import load_certificate

        publics, signatures = roster.publics_of(), roster.signatures_of()
        for client, path in self.config.network.client_certs.items():
            cert = load_certificate(resolve(self.config, path), whose=f"{client}'s certificate")
            verify_key(cert, signatures[client], run_id=self.config.output.run_id, client=client,
                       public=publics[client])

    # -- running -----------------------------------------------------------------------------------------------------
    def pump_options(self) -> dict[str, Any]:
        """Each peer's frames wait for the stage they belong to; in SplitFed and FedAvg a lost client is dropped
        (and may come back through the standing listener)."""
        returns = self.standing.take_returned if self.standing is not None and self.standing.readmit else None
        return {"hold": True, "drops": self.settings.kind in ("splitfed_v1", "splitfed_v2", "fedavg"),
                "returns": returns}

    def finish(self, outcome: Any, comm: dict[str, Any], stage_seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> HorizontalResult:
        """Save this party's own segments and write its result (both runtimes call it)."""
        self.outcome = outcome
        stages = {s.key: s for s in compile_schedule(self.settings, clients=self.h.clients, server=self.h.server,
                                                     rows=self.rows)}
        kinds: dict[str, float] = {}
        rounds = [0.0] * self.settings.rounds
        for key, value in stage_seconds.items():
            stage = stages.get(key)
            kind = stage.kind if stage is not None else key
            kinds[kind] = kinds.get(kind, 0.0) + value
            if stage is not None and stage.kind in (TRAIN, HANDOFF, AVERAGE):
                rounds[stage.round] += value
        result = HorizontalResult(party=self.name, role=self.role, schedule=self.settings.describe(),
                                  history=list(getattr(outcome, "history", [])),
                                  seconds={k: round(v, 4) for k, v in kinds.items()},
                                  round_seconds=[round(x, 4) for x in rounds], comm=comm, rows=dict(self.rows),
                                  lost=sorted(set(lost) | set(getattr(outcome, "lost", []))),
                                  start_round=self.start_round,
                                  secure_aggregation=self.settings.secure(len(self.h.clients)),
                                  readmitted=dict(getattr(outcome, "readmitted", {}) or
                                                  ({self.name: self.rejoined_at} if self.rejoined_at else {})))
        if outcome is not None and getattr(outcome, "modules", None):
            self.save_model(outcome.modules)
        self.result = result
        os.makedirs(self.folder, exist_ok=True)
        self.write_json("result.json", result.__dict__)
        return result

    def save_model(self, modules: Mapping[str, torch.nn.Module]) -> None:
        """``model.npz``: this party's own segments (and a client's preprocessing); nothing of a peer's."""
        self.save_parts(modules, self.party, **self.fingerprint(),
                        **({"label": self.party.label} if self.party is not None else {}))

    # -- scoring with the saved model --------------------------------------------------------------------------------
    def load_model(self) -> None:
        """Load this party's ``model.npz`` (its own segments, a bank's preprocessing) into :attr:`modules`; in
        sequential training only the final holder's client segment scores."""
        self._check_scores()
        state = self.load_parts(self.party, **self.fingerprint())
        with interpreting(self.folder / "model.npz"):
            for name, module in self.modules.items():
                module.load_state_dict({k: torch.as_tensor(v) for k, v in state["segments"][name].items()})
                module.eval()

    def _check_scores(self) -> None:
        """Refuse, naming why, a party that has no part in scoring: a bank that does not hold the final client
        segment (sequential), the server in FedAvg, the federated server."""
        holder = self.final_holder()
        if self.party is not None and holder is not None and holder != self.name:
            raise ConfigError(f"{self.name}: in sequential training the final client segment is {holder}'s (the last "
                              f"turn); score at {holder}, or train with a SplitFed schedule so that every bank holds "
                              "it")
        if self.party is None and not self.is_server:
            raise ConfigError(f"{self.name}: the federated server holds no segment; only the server and the banks "
                              "run `vsplit predict`")
        if self.is_server and self.settings.kind == "fedavg":
            raise ConfigError(f"{self.name}: in FedAvg every bank holds the whole model and scores alone; the server "
                              "has nothing to serve")

    def final_holder(self) -> str | None:
        """Sequential training: the bank whose client segment is the final one (the last turn); None otherwise."""
        from vsplit.horizontal.schedule import turns

        s = self.settings
        return turns(s, self.h.clients, s.rounds - 1)[-1] if s.kind == "sequential" else None

    def parts(self) -> tuple[str, list[str], list[str]]:
        """The bank's source segment, the server's segments and the bank's segments after them, in order."""
        base, client = self.h.base, self.h.client
        source = next(s.name for s in base.sources_of(client))
        server = [s.name for s in base.segments if s.owner == self.h.server]
        after = [s.name for s in base.segments if s.owner == client and s.name != source]
        return source, server, after

    def score_table(self, table: Any, *, channels: Mapping[str, Channel] | None = None,
                    peers: list[str] | None = None, psi_state: Path | None = None,
                    source: Path | None = None) -> Scores:
        """A bank scores ``table``'s customers with its segments and the server's; the server (``table`` None)
        serves ``peers`` (default: every client) until each has scored its rows."""
        if self.party is None:
            return self._serve(peers, channels=channels)
        from vsplit.horizontal.predict import ScoreClient

        began = time.perf_counter()
        ids, inputs = self.party.prepare(table)
        first, server, after = self.parts()
        started = time.perf_counter()
        stats: dict[str, Any] = {}
        with torch.no_grad():
            cut = [self.modules[first](*(t[i:i + BATCH_ROWS] for t in inputs)).numpy()
                   for i in range(0, len(ids), BATCH_ROWS)]
            if self.settings.kind == "fedavg":  # the whole model is here
                outputs = [_run(self.modules, server + after, torch.from_numpy(x)) for x in cut]
            else:
                replies, stats = self.exchange(ScoreClient(self.h.server, cut), channels=channels,
                                               peers=[self.h.server])
                outputs = [_run(self.modules, after, torch.from_numpy(np.asarray(y))) for y in replies]
        proba = self.task.predict(torch.cat(outputs)) if outputs else np.zeros(0)
        own = [str(i) for i in ids]
        return Scores(ids=own, by_id=dict(zip(own, np.asarray(proba).tolist(), strict=True)),
                      missing=f"unknown to {self.name}", communication=stats,
                      seconds={"load_and_prepare": round(started - began, 4),
                               "score": round(time.perf_counter() - started, 4)},
                      summary={"schedule": self.settings.describe()})

    def _serve(self, banks: Sequence[str] | None, *, channels: Mapping[str, Channel] | None) -> Scores:
        from vsplit.horizontal.machines import Hub
        from vsplit.horizontal.predict import ScoreServer

        banks = list(banks) if banks else list(self.h.clients)
        unknown = [b for b in banks if b not in self.h.clients]
        if unknown:
            raise ConfigError(f"--banks: {unknown} are not clients of this split; its clients are "
                              f"{list(self.h.clients)}")
        _, server, _ = self.parts()
        width = self.config.model.embedding_width

        def forward(values: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return _run(self.modules, server, torch.from_numpy(values)).numpy()

        started = time.perf_counter()
        rows, stats = self.exchange(Hub({b: ScoreServer(forward, width=width) for b in banks}), channels=channels,
                                    peers=banks)
        return Scores(communication=stats, seconds={"score": round(time.perf_counter() - started, 3)},
                      summary={"schedule": self.settings.describe(),
                               "rows_scored": {b: int(n) for b, n in rows.items()}})


def _run(modules: Any, names: Sequence[str], x: torch.Tensor) -> torch.Tensor:
    for name in names:
        x = modules[name](x)
    return x


def run_in_process(nodes: Iterable[HorizontalNode], *, taps: Iterable[Any] = ()) -> dict[str, HorizontalResult]:
    """Every node's run in this one process, over memory channels and the real codec (tests, notebooks)."""
    from vsplit.app.local import run_sessions

    nodes = list(nodes)
    for node in nodes:
        node.before_connect()
    pumps: dict[str, Any] = {}
    run_id = nodes[0].config.output.run_id
    outcomes = run_sessions({n.name: n.session() for n in nodes}, session=session_id(run_id), taps=taps,
                            pumps=pumps, order=order)
    out = {}
    for node in nodes:
        from vsplit.runtime.stats import CommStats

        stats = CommStats()
        for stage in pumps.values():
            if node.name in stage:
                stats.merge(stage[node.name].stats)
        out[node.name] = node.finish(outcomes[node.name], stats.as_dict(), {})
    return out
