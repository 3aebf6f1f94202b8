"""Each party's horizontal session: the stages of the schedule it takes part in, as machines, in order.

Theory of operation. Like :mod:`vsplit.app.session`, a session is a generator yielding ``(stage key, machine)`` and
receiving each machine's result, so the in-process runner (:func:`vsplit.horizontal.run.train_horizontal`) and a
party process drive the same code. Every party compiles the same schedule (:func:`compile_schedule`) and skips the
stages it is not in. A client keeps one copy of its segments and one optimizer for the whole run; the server keeps
one server-side model and one optimizer (sequential, SplitFed v2) or one copy and one optimizer per client
(SplitFed v1, averaged by rows after every round, with the same policies as the clients'). Only each segment's owner
ever holds its weights: what a client's outcome holds is its own copy.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.federated.secure_agg import SecAggClient, SecAggConfig, SecAggServer
from vsplit.horizontal.averages import average as average_arrays
from vsplit.horizontal.averages import flatten, unflatten
from vsplit.horizontal.machines import Aggregate, Hub, Receive, Relay, Send, SharedStep, Upload
from vsplit.horizontal.messages import SegmentState
from vsplit.horizontal.readmit import Admitting, AwaitReady, Readmission, Ready, SendAll, catch_up_state
from vsplit.horizontal.rounds import RoundKeeper, my_stages, take_prefix, with_prefix
from vsplit.horizontal.schedule import (
    AVERAGE,
    HANDOFF,
    TRAIN,
    Settings,
    Stage,
    compile_schedule,
    lr_scale,
    server_order,
    stage_plan,
)
from vsplit.horizontal.sealed import open_sealed, seal
from vsplit.horizontal.state import extract, load, reset_optimizer
from vsplit.models.rng import PartyRng
from vsplit.models.schedule import scale_lr
from vsplit.models.seeds import derive_seed
from vsplit.protocol.training import SplitMachine
from vsplit.topology.horizontal import Horizontal

Session = Generator[tuple[str, Any], Any, "HorizontalOutcome"]
OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


@dataclass
class ClientSide:
    """A client's part: its segments (FedAvg: every segment), its rows per source segment and, where it holds
    them (U-shaped, FedAvg), its labels."""

    modules: Mapping[str, nn.Module]
    data: Mapping[str, Sequence[torch.Tensor]]
    optimizer: OptimizerFactory
    labels: torch.Tensor | None = None
    task: Any = None

    @property
    def rows(self) -> int:
        return len(next(iter(self.data.values()))[0])


@dataclass
class ServerSide:
    """The server's part: its segments (their initial weights), and in a vanilla split every client's labels."""

    modules: Mapping[str, nn.Module]
    optimizer: OptimizerFactory
    labels: Mapping[str, torch.Tensor] | None = None
    task: Any = None


@dataclass(frozen=True)
class HandoffKeys:
    """A client's static X25519 key and every client's public key, for hand-offs sealed end to end."""

    own: Any
    public: Mapping[str, bytes]
    #: binds sealed hand-offs to this run (the run id)
    context: bytes = b""


@dataclass
class HorizontalOutcome:
    """What a party keeps: its own segments and optimizer, and (where it holds labels) each turn's training loss."""

    modules: dict[str, nn.Module]
    optimizer: torch.optim.Optimizer | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    #: clients lost mid-run and left out from then on (the server's and a federated server's view)
    lost: list[str] = field(default_factory=list)
    #: clients that were lost, came back and trained again: the round they came back at
    readmitted: dict[str, int] = field(default_factory=dict)


@dataclass
class Gate:
    """How the server or a federated server takes back clients that were lost (:mod:`vsplit.horizontal.readmit`):
    its book, and its answer to a returned client's first message."""

    book: Readmission
    take: Callable[..., Any]

    def wrap(self, stage: Stage, machine: Any) -> Admitting:
        return Admitting(machine, self.book, stage.round, self.take)


def _params(modules: Mapping[str, nn.Module]) -> list[nn.Parameter]:
    return [p for m in modules.values() for p in m.parameters()]


def _record(stage: Stage, client: str, result: Any) -> dict[str, Any]:
    return {"stage": stage.key, "round": stage.round, "client": client,
            "train_loss": result.history[-1]["train_loss"] if result.history else float("nan")}


def state_size(modules: Mapping[str, nn.Module], settings: Settings) -> int:
    """The float values a client's AVERAGE stage sends for ``modules`` (what secure aggregation masks)."""
    policy = _average_policy(settings)
    return len(flatten(extract(modules, None, buffers=policy["buffers"]))[0])


def clients_state_size(h: Horizontal, settings: Settings, clients: Mapping[str, ClientSide]) -> int:
    """:func:`state_size` of the first client's averaged segments (FedAvg: all of them); every client's is alike."""
    first = clients[h.clients[0]]
    own = first.modules if settings.kind == "fedavg" else {s: first.modules[s] for s in h.client_segments}
    return state_size(own, settings)


def _average_policy(settings: Settings) -> dict[str, bool]:
    return {"buffers": settings.buffer_policy == "average", "optimizer_state": settings.optimizer_policy == "average"}


def client_session(
    name: str,
    h: Horizontal,
    settings: Settings,
    rows: Mapping[str, int],
    side: ClientSide,
    keys: HandoffKeys | None = None,
    keeper: RoundKeeper | None = None,
    run_id: str = "horizontal",
    rejoin: bool = False,
    rng_seed: int | None = None,
) -> Session:
    """Client ``name``'s session (``keys``: needed when hand-offs are sealed, and under secure aggregation the
    trusted run keys its masks come from; ``keeper``: round checkpoints; ``run_id``: binds the masks to this run;
    ``rejoin``: the client was lost and is readmitted at ``keeper.start_round``: it first loads the average of the
    round before, :mod:`vsplit.horizontal.readmit`; ``rng_seed``: the seed of its random stream (dropout), default
    ``settings.seed``: between organizations its own init seed, which the server does not know,
    :mod:`vsplit.horizontal.shared_seed`)."""
    if settings.sealed and keys is None:
        raise ConfigError(f"{name}: relayed hand-offs are sealed end to end; give the clients' X25519 keys")
    fedavg = settings.kind == "fedavg"
    topology = h.local(name) if fedavg else h.pair(name)
    wanted = {s.name for s in topology.segments_of(name)}
    if set(side.modules) != wanted:
        raise ConfigError(f"{name}: {settings.kind} needs modules for segments {sorted(wanted)}, got "
                          f"{sorted(side.modules)}")
    modules = dict(side.modules)
    optimizer = side.optimizer(_params(modules))
    rng = PartyRng(derive_seed(_seed(settings, rng_seed), "rng", name) % 2**31)
    coordinator = topology.label_owner == name
    fed = settings.federated_server or h.server
    secure = settings.secure(len(h.clients))
    outcome = HorizontalOutcome(modules=modules, optimizer=optimizer)

    def snapshot() -> dict[str, Any]:
        return {**extract(modules, optimizer, optimizer_state=True), "rng": rng.state.numpy().copy()}

    if keeper is not None and keeper.restored is not None:
        _restore(keeper.restored, rng, lambda arrays: load(modules, optimizer, arrays, sender="checkpoint"))
    if rejoin:
        first = keeper.start_round if keeper is not None else 0
        if first < 1 or settings.kind == "sequential":
            raise ConfigError(f"{name}: only a SplitFed or FedAvg client is readmitted, at round 1 or later")
        msg = yield "catch_up", Receive(fed, round=first - 1)
        arrays = msg.arrays()
        if secure:
            arrays = unflatten(arrays["flat"], flatten(extract(modules, optimizer, **_average_policy(settings)))[1])
        load(modules, optimizer, arrays, sender=fed)
        if not fedavg:
            yield "catch_up", Send(h.server, Ready(round=first))
    stages = compile_schedule(settings, clients=h.clients, server=h.server, rows=rows)
    for stage in my_stages(stages, name, keeper, snapshot, rounds=settings.rounds):
        if stage.kind == TRAIN:
            if settings.kind != "sequential" and settings.optimizer_policy == "reset":
                reset_optimizer(optimizer)
            scale_lr(optimizer, lr_scale(settings, stage.round))
            machine = SplitMachine(
                name=name, topology=topology, modules=modules, optimizer=optimizer, rng=rng, data=side.data,
                labels=side.labels if coordinator else None, task=side.task,
                plan=stage_plan(settings, stage, name, rows[name]) if coordinator else None, patience=None,
                keep_best=False,
            )
            result = yield stage.key, machine
            if coordinator:
                outcome.history.append(_record(stage, name, result))
        elif stage.kind == HANDOFF:
            src, dst = stage.clients
            peer = stage.via or (dst if name == src else src)
            context = (keys.context if keys else b"") + stage.key.encode()
            if name == src:
                arrays = extract(modules, optimizer, optimizer_state=settings.handoff == "full")
                state: Any = SegmentState.pack(round=stage.round, rows=rows[name], arrays=arrays)
                if settings.sealed:
                    assert keys is not None
                    state = seal(state, sender=src, recipient=dst, key=keys.own, recipient_public=keys.public[dst],
                                 context=context)
                yield stage.key, Send(peer, state)
            else:
                msg = yield stage.key, Receive(peer, round=stage.round, sealed=settings.sealed)
                if settings.sealed:
                    assert keys is not None
                    msg = open_sealed(msg, key=keys.own, sender_public=keys.public[src], context=context)
                load(modules, optimizer, msg.arrays(), sender=src)
        elif stage.kind == AVERAGE and secure:
            vector, layout = flatten(extract(modules, optimizer, **_average_policy(settings)))
            config = SecAggConfig(run_id=run_id, round=stage.round, clients=stage.clients, length=len(vector),
                                  server=fed)
            if keys is not None:  # the run keys signed at the join: the federated server cannot swap them
                raw = keys.own.private_bytes_raw()
                agg = SecAggClient(name, config, values=vector, weight=rows[name], private_key=raw, known=keys.public)
            else:
                agg = SecAggClient(name, config, values=vector, weight=rows[name])
            aggregate = yield stage.key, agg
            load(modules, optimizer, unflatten(aggregate.mean, layout), sender=fed)
        elif stage.kind == AVERAGE:
            arrays = extract(modules, optimizer, **_average_policy(settings))
            msg = yield stage.key, Upload(fed, SegmentState.pack(round=stage.round, rows=rows[name], arrays=arrays))
            load(modules, optimizer, msg.arrays(), sender=fed)
    return outcome


def server_session(h: Horizontal, settings: Settings, rows: Mapping[str, int], side: ServerSide | None,
                   keeper: RoundKeeper | None = None, *, run_id: str = "horizontal",
                   state_size: int | None = None, gate: Gate | None = None, rng_seed: int | None = None) -> Session:
    """The server's session (with ``side=None`` in FedAvg, where it only averages; ``keeper``: round checkpoints;
    ``state_size``: the values in a client's averaged state, needed under secure aggregation; ``gate``: takes back
    clients that were lost, :mod:`vsplit.horizontal.readmit`; ``rng_seed``: the seed of its random streams
    (dropout), default ``settings.seed``: between organizations the server's own init seed).

    A client whose link is lost in a SplitFed or FedAvg stage (the runtime calls the machine's ``drop``) is left out
    of that stage and of every later one, unless it comes back (``gate``): then it trains again from the round after
    the one it came back in; the clients still there finish the run."""
    name, kind = h.server, settings.kind
    if side is None and kind != "fedavg":
        raise ConfigError(f"{kind} needs the server's segments")
    if side is not None and set(side.modules) != set(h.server_segments):
        raise ConfigError(f"the server needs modules for {sorted(h.server_segments)}, got {sorted(side.modules)}")
    if side is not None and h.labels_at_server and kind != "fedavg":
        missing = [c for c in h.clients if side.labels is None or c not in side.labels]
        if missing:
            raise ConfigError(f"vanilla: the server holds every client's labels; none for {missing}")
    seed = _seed(settings, rng_seed)
    rng = PartyRng(derive_seed(seed, "rng", name) % 2**31)
    shared = dict(side.modules) if side is not None else {}
    optimizer = side.optimizer(_params(shared)) if side is not None and kind != "fedavg" else None
    copies: dict[str, dict[str, nn.Module]] = {}
    optimizers: dict[str, torch.optim.Optimizer] = {}
    copy_rngs: dict[str, PartyRng] = {}
    if kind == "splitfed_v1":
        assert side is not None
        copies = {c: copy.deepcopy(shared) for c in h.clients}
        optimizers = {c: side.optimizer(_params(copies[c])) for c in h.clients}
        # each client's copy draws its dropout from its own stream: the copies train side by side, their steps
        # interleaved in whatever order the clients' batches arrive, so one shared stream would hand each copy other
        # masks in a run as processes than in one process
        copy_rngs = {c: PartyRng(derive_seed(seed, "rng", name, c) % 2**31) for c in h.clients}
    outcome = HorizontalOutcome(modules=shared, optimizer=optimizer)

    def machine(stage: Stage, client: str, modules: Mapping[str, nn.Module], opt: Any) -> SplitMachine:
        assert side is not None
        at_server = h.labels_at_server
        return SplitMachine(
            name=name, topology=h.pair(client), modules=modules, optimizer=opt, rng=copy_rngs.get(client, rng),
            labels=side.labels[client] if at_server and side.labels is not None else None, task=side.task,
            plan=stage_plan(settings, stage, client, rows[client]) if at_server else None, patience=None,
            keep_best=False,
        )

    def snapshot() -> dict[str, Any]:
        out: dict[str, Any] = {"rng": rng.state.numpy().copy()}
        if copies:
            for c in h.clients:
                out.update(with_prefix(f"{c}|", extract(copies[c], optimizers[c], optimizer_state=True)))
                out[f"{c}|rng"] = copy_rngs[c].state.numpy().copy()
        elif optimizer is not None:
            out.update(extract(shared, optimizer, optimizer_state=True))
        return out

    def restore(arrays: Mapping[str, Any]) -> None:
        if copies:
            for c in h.clients:
                mine = dict(take_prefix(f"{c}|", arrays))
                if "rng" in mine:  # checkpoints written before the copies had streams of their own lack it
                    copy_rngs[c].state = torch.from_numpy(np.asarray(mine.pop("rng"), np.uint8).copy())
                load(copies[c], optimizers[c], mine, sender="checkpoint")
        elif optimizer is not None:
            load(shared, optimizer, arrays, sender="checkpoint")

    if keeper is not None and keeper.restored is not None:
        _restore(keeper.restored, rng, restore)
    gone: set[str] = gate.book.gone if gate is not None else set()  # clients lost mid-run (SplitFed, FedAvg)

    def here(stage: Stage) -> list[str]:
        return [c for c in stage.clients if c not in gone]

    def wrap(stage: Stage, machine: Any) -> Any:
        return gate.wrap(stage, machine) if gate is not None else machine

    stages = compile_schedule(settings, clients=h.clients, server=name, rows=rows)
    for stage in my_stages(stages, name, keeper, snapshot, rounds=settings.rounds):
        if stage.kind == TRAIN and kind != "sequential" and gate is not None and gate.book.ready_for(stage.round):
            wait = AwaitReady(gate.book.ready_for(stage.round), stage.round)
            yield stage.key, wrap(stage, wait)
            for c in wait.ready:
                gate.book.welcome(c)
                if copies:  # its server-side copy starts from the others' average, as its client side does
                    ref = next(x for x in here(stage) if x not in wait.ready)
                    load(copies[c], optimizers[c], extract(copies[ref], optimizers[ref], optimizer_state=True),
                         sender="readmission")
        for opt in ([*optimizers.values()] if copies else [optimizer]) if stage.kind == TRAIN else []:
            if opt is not None:
                scale_lr(opt, lr_scale(settings, stage.round))
        if stage.kind == TRAIN and kind == "sequential":
            result = yield stage.key, machine(stage, stage.clients[0], shared, optimizer)
            results = {stage.clients[0]: result}
        elif stage.kind == TRAIN and kind == "splitfed_v1":
            if settings.optimizer_policy == "reset":
                for opt in optimizers.values():
                    reset_optimizer(opt)
            hub = Hub({c: machine(stage, c, copies[c], optimizers[c]) for c in here(stage)})
            results = yield stage.key, wrap(stage, hub)
            gone.update(hub.dropped)
            _average_copies({c: copies[c] for c in here(stage)}, optimizers, rows, settings)
        elif stage.kind == TRAIN:  # splitfed_v2: one server-side model takes the clients' batches in turn
            assert optimizer is not None
            counter = SharedStep(optimizer)
            steps = {c: len(stage_plan(settings, stage, c, rows[c]).batches(0)) for c in here(stage)}
            hub = Hub({c: machine(stage, c, shared, counter) for c in here(stage)},
                      order=server_order(settings.interleave, steps), counter=counter, shared=list(shared.values()))
            results = yield stage.key, wrap(stage, hub)
            gone.update(hub.dropped)
        elif stage.kind == HANDOFF:
            yield stage.key, Relay(stage.clients[0], stage.clients[1], round=stage.round, sealed=settings.sealed)
            continue
        else:
            yield from _average_stage(name, stage, settings, rows, gone, run_id=run_id, state_size=state_size,
                                      clients=len(h.clients), gate=gate)
            continue
        if h.labels_at_server:
            outcome.history += [_record(stage, c, r) for c, r in results.items()]
    if copies:
        first = next(c for c in h.clients if c not in gone)
        outcome.modules = copies[first]
        outcome.optimizer = optimizers[first]
    outcome.lost = sorted(gone | set(gate.book.back) if gate is not None else gone)
    outcome.readmitted = dict(gate.book.back) if gate is not None else {}
    return outcome


def _seed(settings: Settings, rng_seed: int | None) -> int:
    """The seed of a party's random streams: its own (``rng_seed``), or in one process ``settings.seed``."""
    return settings.seed if rng_seed is None else int(rng_seed)


def _restore(arrays: Mapping[str, Any], rng: PartyRng, load_rest: Callable[[Mapping[str, Any]], None]) -> None:
    """Restore a round checkpoint: the random stream, then the party's modules and optimizers."""
    rng.state = torch.from_numpy(np.asarray(arrays["rng"], np.uint8).copy())
    load_rest({k: v for k, v in arrays.items() if k != "rng"})


def _average_copies(
    copies: Mapping[str, dict[str, nn.Module]],
    optimizers: Mapping[str, torch.optim.Optimizer],
    rows: Mapping[str, int],
    settings: Settings,
) -> None:
    """SplitFed v1: the server's per-client copies, averaged by rows (the clients' policies apply)."""
    clients = list(copies)
    policy = _average_policy(settings)
    mean = average_arrays([extract(copies[c], optimizers[c], **policy) for c in clients],
                            [rows[c] for c in clients])
    for c in clients:
        load(copies[c], optimizers[c], mean, sender="average")


def federated_session(name: str, h: Horizontal, settings: Settings, rows: Mapping[str, int],
                      keeper: RoundKeeper | None = None, *, run_id: str = "horizontal",
                      state_size: int | None = None, gate: Gate | None = None) -> Session:
    """A separate federated server's session: it only averages the clients' states (and keeps no state);
    ``gate``: takes back clients that were lost (:mod:`vsplit.horizontal.readmit`)."""
    stages = compile_schedule(settings, clients=h.clients, server=h.server, rows=rows)
    gone: set[str] = gate.book.gone if gate is not None else set()
    for stage in my_stages(stages, name, keeper, dict, rounds=settings.rounds):
        if stage.kind == AVERAGE:
            yield from _average_stage(name, stage, settings, rows, gone, run_id=run_id, state_size=state_size,
                                      clients=len(h.clients), gate=gate)
    back = dict(gate.book.back) if gate is not None else {}
    return HorizontalOutcome(modules={}, lost=sorted(gone | set(back)), readmitted=back)


def _average_stage(name: str, stage: Stage, settings: Settings, rows: Mapping[str, int], gone: set[str], *,
                   run_id: str, state_size: int | None, clients: int, gate: Gate | None = None) -> Session:
    """The federated server's part of an AVERAGE stage, in clear or under secure aggregation; lost clients are
    added to ``gone``; with a ``gate``, clients readmitted from the next round get this average (their catch-up)."""
    wrap = (lambda m: gate.wrap(stage, m)) if gate is not None else (lambda m: m)
    if settings.secure(clients):
        if state_size is None:
            raise ConfigError("secure aggregation: the federated server needs the size of a client's state")
        config = SecAggConfig(run_id=run_id, round=stage.round, clients=stage.clients, length=state_size,
                              server=name)
        server = SecAggServer(config)
        for client in sorted(gone & set(stage.clients)):
            server.drop(client)  # lost earlier: not awaited (too few left is a clear error)
        yield stage.key, wrap(server)
        gone.update(set(stage.clients) - set(server.alive))
        assert server.result is not None
        mean: Any = server.result.mean
        total = server.result.total_weight
    else:
        aggregate = Aggregate({c: rows[c] for c in stage.clients if c not in gone}, round=stage.round,
                              average=average_arrays, reserve=rows)
        yield stage.key, wrap(aggregate)
        gone.update(aggregate.dropped)
        mean, total = aggregate.result, sum(aggregate.rows.values())
    if gate is not None:
        out = gate.book.catch_ups(stage.round, catch_up_state(stage.round, total, mean))
        if out:
            yield stage.key, SendAll(out)
    return HorizontalOutcome(modules={})
