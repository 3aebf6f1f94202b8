"""Training schedules for many clients with the same columns, as pure, printable plans.

Theory of operation. A schedule compiles to a tuple of :class:`Stage` objects, the same at every party (it depends
only on the settings, the client names and their row counts, which every party knows). A stage is one of

- ``train``: some clients train their segments with the server over their own rows, each client one pass over its
  rows in seeded batches (:func:`stage_plan`). In ``sequential`` one client trains at a time; in ``splitfed_v1`` all
  clients train at once, each with its own server-side copy; in ``splitfed_v2`` all clients at once against one
  server-side model that takes their batches one after another in the order :func:`server_order` gives
  (``client_major``: each client's batches in turn; ``batch_interleaved``: batch 1 of every client, then batch 2...);
  in ``fedavg`` every client trains the whole model alone;
- ``handoff`` (sequential): the client that just trained hands its client segments' weights, buffers and optimizer
  state to the next, directly or relayed by the server;
- ``average`` (SplitFed, FedAvg): every client sends its client-side state to the federated server (the server unless
  another party is configured), which sends back the row-weighted average.

Each party runs the stages it takes part in, in order; since every party follows the one global order, no two
parties can wait on each other. The server's optimizer persists across batches and rounds; what happens to the
clients' optimizer state and BatchNorm buffers at each average is an explicit setting (:class:`Settings`).

Example:
    >>> s = Settings(kind="sequential", rounds=1, route="server")
    >>> print(format_schedule(compile_schedule(s, clients=("a", "b"), server="lab", rows={"a": 40, "b": 30}), s))
    sequential: order fixed, hand-off full via server (sealed)
      h00000 round 0 train a+lab
      h00001 round 0 handoff a->b via lab
      h00002 round 0 train b+lab
    >>> server_order("batch_interleaved", {"a": 3, "b": 1})
    ['a', 'b', 'a', 'a']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ConfigError
from vsplit.models.schedule import lr_factor
from vsplit.models.seeds import derive_seed
from vsplit.protocol.training.messages import ROLE_TRAIN
from vsplit.protocol.training.plan import Plan

SCHEDULES = ("sequential", "splitfed_v1", "splitfed_v2", "fedavg")
ORDERS = ("fixed", "random", "random_no_repeat")
ROUTES = ("direct", "server")
HANDOFFS = ("full", "weights")
INTERLEAVES = ("client_major", "batch_interleaved")
#: At each average: ``keep`` each copy's own optimizer state, ``reset`` it, or ``average`` it with the weights.
OPTIMIZER_POLICIES = ("keep", "reset", "average")
#: At each average: ``average`` float buffers (BatchNorm statistics) with the weights, or keep them ``local``.
BUFFER_POLICIES = ("average", "local")
TRAIN, HANDOFF, AVERAGE = "train", "handoff", "average"
SECURE = ("auto", "on", "off")
#: The learning rate per round, as a fraction of the optimizers' own: ``constant``; ``step`` (times ``lr_factor``
#: from ``lr_step_at`` of the rounds on); ``cosine`` (from 1 down to ``lr_factor`` at the last round).
LR_SCHEDULES = ("constant", "step", "cosine")


@dataclass(frozen=True)
class Settings:
    """How many clients train together: the schedule and its explicit policies.

    Attributes:
        kind: one of :data:`SCHEDULES`.
        rounds: rounds; in a round every client makes one pass over its rows (``random``: as many turns as clients).
        batch_size / seed: the batches of every turn derive from ``seed``, the client and the stage.
        order: sequential: ``fixed`` (the clients in order), ``random`` (each turn a seeded draw, repeats allowed)
            or ``random_no_repeat`` (a seeded permutation per round).
        route: sequential hand-off ``direct`` (client to client) or relayed by the ``server``.
        handoff: ``full`` (weights, buffers and optimizer state) or ``weights`` (weights and buffers only).
        interleave: splitfed_v2's server order, ``client_major`` or ``batch_interleaved``.
        optimizer_policy / buffer_policy: what each average does with the optimizer state and the buffers.
        federated_server: the party that averages client-side weights (``None``: the server).
        seal: a hand-off relayed by the server is encrypted end to end between the two clients.
        secure_aggregation: ``"auto"`` (on for SplitFed and FedAvg with 3 or more clients), ``"on"`` or ``"off"``:
            the federated server learns only the row-weighted sum of the clients' states
            (:mod:`vsplit.federated.secure_agg`).
        lr_schedule / lr_step_at / lr_factor: every optimizer's learning rate per round (:data:`LR_SCHEDULES`,
            :func:`lr_scale`), at the clients and the server alike.
    """

    kind: str = "splitfed_v1"
    rounds: int = 1
    batch_size: int = 64
    seed: int = 0
    order: str = "fixed"
    route: str = "direct"
    handoff: str = "full"
    interleave: str = "batch_interleaved"
    optimizer_policy: str = "keep"
    buffer_policy: str = "average"
    federated_server: str | None = None
    seal: bool = True
    secure_aggregation: str = "auto"
    lr_schedule: str = "constant"
    lr_step_at: float = 0.9
    lr_factor: float = 0.1

    @property
    def sealed(self) -> bool:
        """Whether hand-offs travel encrypted end to end (relayed by the server, with ``seal``)."""
        return self.kind == "sequential" and self.route == "server" and self.seal

    def __post_init__(self) -> None:
        for name, value, choices in (
            ("kind", self.kind, SCHEDULES), ("order", self.order, ORDERS), ("route", self.route, ROUTES),
            ("handoff", self.handoff, HANDOFFS), ("interleave", self.interleave, INTERLEAVES),
            ("optimizer_policy", self.optimizer_policy, OPTIMIZER_POLICIES),
            ("buffer_policy", self.buffer_policy, BUFFER_POLICIES),
            ("secure_aggregation", self.secure_aggregation, SECURE), ("lr_schedule", self.lr_schedule, LR_SCHEDULES),
        ):
            if value not in choices:
                raise ConfigError(f"schedule {name} must be one of {list(choices)}, got {value!r}")
        if self.rounds < 1 or self.batch_size < 1 or self.seed < 0:
            raise ConfigError("schedule rounds and batch_size must be at least 1, seed non-negative")
        if not 0 < self.lr_step_at <= 1 or not 0 <= self.lr_factor <= 1:
            raise ConfigError(f"schedule lr_step_at must be in (0, 1] and lr_factor in [0, 1], got {self.lr_step_at} "
                              f"and {self.lr_factor}")
        if self.secure_aggregation == "on" and self.kind == "sequential":
            raise ConfigError("secure_aggregation: sequential training averages nothing; set it to off or auto")
        if self.secure_aggregation != "off" and self.kind != "sequential" and self.optimizer_policy == "average":
            if self.secure_aggregation == "on":
                raise ConfigError("secure_aggregation: it averages weights and buffers, not optimizer state (whose "
                                  "step counts exceed its fixed-point range); set optimizer_policy to keep or reset, "
                                  "or secure_aggregation to off")

    def secure(self, clients: int) -> bool:
        """Whether the averages of a run with ``clients`` clients go through secure aggregation."""
        if self.kind == "sequential" or self.secure_aggregation == "off":
            return False
        if self.secure_aggregation == "on":
            if clients < 3:
                raise ConfigError(f"secure_aggregation: needs at least 3 clients (with {clients} the mean reveals "
                                  "each update); set it to off or auto")
            return True
        return clients >= 3 and self.optimizer_policy != "average"  # auto
    def describe(self) -> str:
        """One line naming the schedule and the settings that decide its result."""
        lr = ""
        if self.lr_schedule == "step":
            lr = f", lr x{self.lr_factor:g} from {self.lr_step_at:g} of the rounds"
        elif self.lr_schedule == "cosine":
            lr = f", lr cosine to x{self.lr_factor:g}"
        if self.kind == "sequential":
            via = "direct" if self.route == "direct" else "via server" + (" (sealed)" if self.seal else " (in clear)")
            return f"sequential: order {self.order}, hand-off {self.handoff} {via}" + lr
        text = f"{self.kind}: optimizer {self.optimizer_policy}, buffers {self.buffer_policy}"
        text += f", server order {self.interleave}" if self.kind == "splitfed_v2" else ""
        return text + f", secure aggregation {self.secure_aggregation}" + lr


@dataclass(frozen=True)
class Stage:
    """One step of a schedule: who takes part, and (``handoff``) who hands on to whom."""

    index: int
    round: int
    kind: str
    clients: tuple[str, ...]
    parties: tuple[str, ...]
    via: str | None = None

    @property
    def key(self) -> str:
        """The stage's name on the wire and in the runners (ordered like the stages)."""
        return f"h{self.index:05d}"

    def __str__(self) -> str:
        if self.kind == HANDOFF:
            route = f" via {self.via}" if self.via else " direct"
            return f"{self.key} round {self.round} handoff {self.clients[0]}->{self.clients[1]}{route}"
        others = [p for p in self.parties if p not in self.clients]
        who = "+".join(self.clients) if self.kind == TRAIN else ",".join(self.clients)
        if self.kind == TRAIN:
            return f"{self.key} round {self.round} train {who}" + (f"+{others[0]}" if others else "")
        return f"{self.key} round {self.round} average {who} at {others[0] if others else '?'}"


def stage_order(key: str) -> int:
    """Sort key of stage names: their index."""
    return int(key[1:])


def compile_schedule(
    settings: Settings, *, clients: Sequence[str], server: str, rows: Mapping[str, int]
) -> tuple[Stage, ...]:
    """Every stage of ``settings`` for ``clients`` (with ``rows`` rows each) and ``server``, in order."""
    clients = tuple(clients)
    missing = [c for c in clients if rows.get(c, 0) < 1]
    if missing:
        raise ConfigError(f"schedule: every client needs at least one row; none for {missing}")
    fed = settings.federated_server or server
    if fed in clients:
        raise ConfigError(f"schedule: the federated server {fed!r} cannot be a client")
    stages: list[Stage] = []

    def add(round_: int, kind: str, who: tuple[str, ...], parties: tuple[str, ...], via: str | None = None) -> None:
        stages.append(Stage(len(stages), round_, kind, who, parties, via))

    previous: str | None = None
    for r in range(settings.rounds):
        if settings.kind == "sequential":
            for c in turns(settings, clients, r):
                if previous is not None and previous != c:
                    relay = settings.route == "server"
                    add(r, HANDOFF, (previous, c), (previous, server, c) if relay else (previous, c),
                        server if relay else None)
                add(r, TRAIN, (c,), (c, server))
                previous = c
            continue
        if settings.kind == "fedavg":
            add(r, TRAIN, clients, clients)
        else:
            add(r, TRAIN, clients, (*clients, server))
        add(r, AVERAGE, clients, tuple(dict.fromkeys((*clients, fed))))
    return tuple(stages)


def turns(settings: Settings, clients: Sequence[str], round_: int) -> list[str]:
    """The sequential turns of round ``round_``."""
    if settings.order == "fixed":
        return list(clients)
    rng = np.random.default_rng(derive_seed(settings.seed, "turns", str(round_)))
    if settings.order == "random":
        return [clients[i] for i in rng.integers(0, len(clients), size=len(clients))]
    return [clients[i] for i in rng.permutation(len(clients))]


def lr_scale(settings: Settings, round_: int) -> float:
    """Round ``round_``'s learning rate as a fraction of the optimizers' own (``settings.lr_schedule``).

    Example:
        >>> s = Settings(rounds=10, lr_schedule="step", lr_step_at=0.9, lr_factor=0.1)
        >>> [lr_scale(s, r) for r in (0, 8, 9)]
        [1.0, 1.0, 0.1]
        >>> c = Settings(rounds=3, lr_schedule="cosine", lr_factor=0.0)
        >>> [round(lr_scale(c, r), 3) for r in range(3)]
        [1.0, 0.75, 0.25]
    """
    if settings.lr_schedule == "step":
        return 1.0 if round_ < settings.lr_step_at * settings.rounds else settings.lr_factor
    if settings.lr_schedule == "cosine":
        return settings.lr_factor + (1 - settings.lr_factor) * lr_factor("cosine", round_, settings.rounds)
    return 1.0


def stage_plan(settings: Settings, stage: Stage, client: str, n_rows: int) -> Plan:
    """The plan of ``client``'s pass over its ``n_rows`` rows in ``stage``: one epoch, every row trains."""
    seed = derive_seed(settings.seed, "batches", client, str(stage.index)) % 2**31
    return Plan(epochs=1, batch_size=settings.batch_size, seed=seed, roles=np.full(n_rows, ROLE_TRAIN, np.uint8))


def server_order(interleave: str, steps: Mapping[str, int]) -> list[str]:
    """splitfed_v2: the client whose batch the server takes at each of its steps."""
    if interleave == "client_major":
        return [c for c, n in steps.items() for _ in range(n)]
    if interleave != "batch_interleaved":
        raise ConfigError(f"interleave must be one of {list(INTERLEAVES)}, got {interleave!r}")
    return [c for i in range(max(steps.values(), default=0)) for c, n in steps.items() if i < n]


def format_schedule(stages: Sequence[Stage], settings: Settings | None = None) -> str:
    """The stages, one a line, under the settings' description (as ``compile_schedule``'s example prints)."""
    head = [settings.describe()] if settings is not None else []
    return "\n".join(head + [f"  {s}" for s in stages])
