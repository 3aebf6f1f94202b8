"""Secure aggregation (Bonawitz et al., CCS 2017, simplified): the federated server learns only the weighted sum.

Theory of operation. Each client ``i`` quantizes its row-weighted update ``w_i x_i`` to fixed point modulo ``2^k``
and appends its row count ``w_i`` (:class:`~vsplit.federated.quantize.FixedPoint`), then adds its pairwise masks
(:mod:`vsplit.federated.masking`): ``+PRG(s_ij)`` for every other member ``j > i``, ``-PRG(s_ij)`` for ``j < i``,
with ``s_ij`` from an X25519 agreement between ``i`` and ``j``. Each masked vector on its own is uniformly
distributed; summed over all members modulo ``2^k`` the masks cancel, so the server gets exactly the integer sum
``sum_i round(w_i x_i 2^f)`` and the total rows ``W = sum_i w_i``, and returns the mean ``sum / (2^f W)`` to the
members. The server learns the total rows, not each client's.

One round, one pair of machines per party (sans-IO: messages in, messages out, no sockets or clocks)::

    client  -- PublicKey -->  server        (fresh X25519 key per round)
    client <--  Roster   --   server        (attempt a: members and their public keys, relayed)
    client  -- MaskedInput -> server
    client <-- AggregateResult -- server    (the row-weighted mean; the round is done)

Dropouts. A client that drops before its masked input arrives (the driver calls :meth:`SecAggServer.drop`) makes
the server REDO the attempt: a new :class:`Roster` of the survivors with attempt ``a + 1``; the survivors mask
their same update again with masks among survivors only, derived with the attempt number in the HKDF info, so no
mask is reused. Masked inputs of the abandoned attempt are discarded. There is no Shamir secret sharing: a dropped
client's masks are never reconstructed. A client that drops after sending needs no redo.

Refusals. Fewer than ``min_clients`` (3) members is refused by the server and by every client (with two, each learns
the other's update from the mean; with one, the "mask" is nothing) unless the config explicitly sets
``allow_fewer=True``. A client also refuses a roster that leaves it out, names clients outside the previous
attempt's roster, repeats a public key or changes its own key, or goes back to an earlier attempt.

What it does not protect (see docs/clients.md, "Secure aggregation"):

- The mean itself is revealed to the server and all members; with two members each learns the other's update.
- The server relays the public keys. A malicious server can substitute keys (give client ``i`` a key of its own
  for client ``j``), derive the masks itself and unmask ``i``. vsplit pins every party's TLS certificate, but the
  X25519 keys are NOT signed with the client's TLS identity key here, so the protection holds against an
  honest-but-curious server only; signing ``(run id, round, public key)`` with the pinned identity key and having
  clients verify each other's signatures is what closes this.
- A malicious server can also claim a dropout it did not see and, by differencing the sums of two attempts,
  learn one client's update: redo-based dropout handling trusts the server to report dropouts truthfully.
- The server colluding with ``n - 1`` members learns the last member's update (any aggregate reveals that); with
  ``n - 2`` members it learns the sum of the two others.

API:
    ``SecAggConfig(run_id, round, clients, length, fixed_point=FixedPoint(), min_clients=3, allow_fewer=False)``;
    ``SecAggClient(name, config, values=..., weight=..., private_key=None)`` and ``SecAggServer(config)``, both
    with ``start()``, ``receive(sender, msg)``, ``done``, ``result`` (:class:`Aggregate`), ``expects(peer)``; the
    server's ``drop(client)``; ``plain_aggregate(updates, weights, fixed_point)``, the same sum without masks.

Example:
    >>> import numpy as np
    >>> config = SecAggConfig(run_id="r1", round=0, clients=("a", "b", "c"), length=2)
    >>> updates = {"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5.0, 6.0]}
    >>> clients = {n: SecAggClient(n, config, values=np.array(v), weight=1) for n, v in updates.items()}
    >>> result = run_in_memory(SecAggServer(config), clients)
    >>> result.mean.tolist(), result.total_weight
    ([3.0, 4.0], 3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vsplit.errors import ConfigError, ProtocolError
from vsplit.federated.masking import MaskContext, mask_for, new_private_key, public_key
from vsplit.federated.quantize import FixedPoint
from vsplit.federated.secagg_messages import (
    MAX_CLIENTS,
    MAX_LENGTH,
    AggregateResult,
    MaskedInput,
    PublicKey,
    Roster,
)
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message

#: The fewest members an aggregation hides individual updates among.
MIN_CLIENTS = 3


@dataclass(frozen=True)
class SecAggConfig:
    """What every party of one aggregation agrees on.

    Attributes:
        run_id: The run's id (bound into every mask).
        round: The training round (bound into every mask).
        clients: Client names in the agreed order; a client's index is its position.
        length: The number of values each client aggregates.
        fixed_point: Quantization and its bounds (see :mod:`vsplit.federated.quantize`).
        server: The federated server's party name.
        min_clients: The fewest members an attempt may have (>= 3 unless ``allow_fewer``).
        allow_fewer: Explicitly allow fewer than 3 members (then the mean reveals individual updates).
    """

    run_id: str
    round: int
    clients: tuple[str, ...]
    length: int
    fixed_point: FixedPoint = field(default_factory=FixedPoint)
    server: str = "federated"
    min_clients: int = MIN_CLIENTS
    allow_fewer: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "clients", tuple(self.clients))
        if len(set(self.clients)) != len(self.clients) or self.server in self.clients:
            raise ConfigError(f"secure aggregation: client names must be distinct and differ from the server's "
                              f"({self.server!r}), got {list(self.clients)}")
        if not 1 <= len(self.clients) <= MAX_CLIENTS:
            raise ConfigError(f"secure aggregation: 1..{MAX_CLIENTS} clients, got {len(self.clients)}")
        if not 1 <= self.length <= MAX_LENGTH:
            raise ConfigError(f"secure aggregation: length must be 1..{MAX_LENGTH}, got {self.length}")
        if self.round < 0:
            raise ConfigError(f"secure aggregation: round must be >= 0, got {self.round}")
        if self.min_clients < 1 or (self.min_clients < MIN_CLIENTS and not self.allow_fewer):
            raise ConfigError(
                f"secure aggregation: min_clients={self.min_clients} would let the mean reveal single updates; "
                f"use at least {MIN_CLIENTS}, or set allow_fewer=True to accept that explicitly"
            )
        if len(self.clients) < self.min_clients:
            raise ConfigError(
                f"secure aggregation needs at least {self.min_clients} clients, got {len(self.clients)}; "
                "turn it off (the server then sees every update) or set min_clients with allow_fewer=True"
            )
        self.fixed_point.check_capacity(len(self.clients))

    def index(self, name: str) -> int:
        """The agreed index of client ``name``."""
        try:
            return self.clients.index(name)
        except ValueError:
            raise ProtocolError(f"secure aggregation: {name!r} is not a client of this aggregation") from None

    def context(self, attempt: int) -> MaskContext:
        """The mask context of ``attempt`` in this round."""
        return MaskContext(run_id=self.run_id, round=self.round, attempt=attempt)


@dataclass(frozen=True)
class Aggregate:
    """What an aggregation produced.

    Attributes:
        mean: ``sum_i w_i x_i / sum_i w_i`` after dequantization (float64).
        total_weight: ``sum_i w_i``, the rows behind the mean.
        quantized_sum: The exact integer sum ``sum_i round(w_i x_i 2^f)``, then the total rows (int64).
        members: The clients whose updates are in it.
        attempt: Which attempt of the round produced it (0 unless a client dropped).
    """

    mean: np.ndarray
    total_weight: int
    quantized_sum: np.ndarray
    members: tuple[str, ...]
    attempt: int


def plain_aggregate(
    updates: Sequence[np.ndarray], weights: Sequence[int], fixed_point: FixedPoint, *, members: Sequence[str] = ()
) -> Aggregate:
    """The same aggregate without masks: the reference secure aggregation must equal exactly."""
    total = np.zeros(len(np.asarray(updates[0]).reshape(-1)) + 1, dtype=np.uint64)
    for values, weight in zip(updates, weights, strict=True):
        total += fixed_point.encode(values, weight=weight)
    return _aggregate(total & fixed_point.mask, fixed_point, members=tuple(members), attempt=0)


def _aggregate(total: np.ndarray, fixed_point: FixedPoint, *, members: tuple[str, ...], attempt: int) -> Aggregate:
    weighted, rows = fixed_point.decode(total)
    if rows < 1:
        raise ProtocolError("secure aggregation: the members hold no rows in total", local=True)
    return Aggregate(mean=weighted / rows, total_weight=rows, quantized_sum=fixed_point.signed(total),
                     members=members, attempt=attempt)


class SecAggClient:
    """One client's side of one aggregation (sans-IO).

    Args:
        name: This client's name in ``config.clients``.
        config: The aggregation's agreed settings.
        values: This client's update ``x_i`` (``config.length`` values, ``|x| <= fixed_point.bound``).
        weight: Its row count ``w_i``.
        private_key: A 32-byte X25519 private key; by default a fresh one (one per round).
        known: Every client's public key as this client already trusts it (between processes: the run keys each
            client signed with its TLS identity at the join, checked against its pinned certificate); a roster
            whose relayed key differs is refused, so a federated server cannot swap in keys of its own. Give it
            with that run key as ``private_key``; the masks stay fresh per round and attempt (their context).
    """

    def __init__(
        self, name: str, config: SecAggConfig, *, values: np.ndarray, weight: int, private_key: bytes | None = None,
        known: Mapping[str, bytes] | None = None,
    ) -> None:
        self.name, self.config = name, config
        self.index = config.index(name)
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if values.size != config.length:
            raise ConfigError(f"secure aggregation: {name} has {values.size} values, the config says {config.length}")
        self._encoded = config.fixed_point.encode(values, weight=weight)
        self._private = private_key if private_key is not None else new_private_key()
        self.public = public_key(self._private)
        self._known = dict(known) if known is not None else None
        if self._known is not None and self._known.get(name) != self.public:
            raise ConfigError(f"secure aggregation: {name}'s private key does not match its known public key")
        self._attempt = -1
        self._members: set[int] | None = None
        self.done = False
        self.result: Aggregate | None = None

    def start(self) -> list[Outgoing]:
        """Send this round's public key to the server."""
        key = np.frombuffer(self.public, dtype=np.uint8).copy()
        return [Outgoing(self.config.server, PublicKey(round=self.config.round, key=key))]

    def expects(self, peer: str) -> bool:
        """Only the server ever sends to a client, until the result arrives."""
        return peer == self.config.server and not self.done

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Mask and send on a roster; finish on the result."""
        if sender != self.config.server:
            raise ProtocolError(f"secure aggregation: {self.name} got a message from {sender!r}, not the server")
        if self.done:
            raise ProtocolError(f"secure aggregation: {type(msg).__name__} after the result")
        if isinstance(msg, Roster):
            return self._on_roster(msg)
        if isinstance(msg, AggregateResult):
            return self._on_result(msg)
        raise ProtocolError(f"secure aggregation: a client does not take {type(msg).__name__}")

    def _on_roster(self, msg: Roster) -> list[Outgoing]:
        config = self.config
        if msg.round != config.round or msg.attempt <= self._attempt:
            raise ProtocolError(f"secure aggregation: roster for round {msg.round} attempt {msg.attempt}, "
                                f"expected round {config.round} after attempt {self._attempt}")
        members = [int(m) for m in msg.members]
        if members[-1] >= len(config.clients) or self.index not in members:
            raise ProtocolError("secure aggregation: the roster names unknown clients or leaves this client out")
        if len(members) < config.min_clients:
            raise ProtocolError(f"secure aggregation: a roster of {len(members)} members is below the "
                                f"{config.min_clients} this client masks among")
        if self._members is not None and not set(members) <= self._members:
            raise ProtocolError("secure aggregation: a redo roster adds clients that were not in the last attempt")
        keys = [bytes(k) for k in msg.keys]
        if len(set(keys)) != len(keys) or keys[members.index(self.index)] != self.public:
            raise ProtocolError("secure aggregation: the roster repeats a public key or changes this client's own")
        if self._known is not None:
            for member, key in zip(members, keys, strict=True):
                client = config.clients[member]
                if self._known.get(client) != key:
                    raise ProtocolError(f"secure aggregation: the roster's key for {client!r} is not the key "
                                        f"{client!r} signed at the join; the federated server changed it")
        self._attempt, self._members = msg.attempt, set(members)
        mask = mask_for(self.index, self._private, dict(zip(members, keys, strict=True)),
                        context=config.context(msg.attempt), length=config.length + 1,
                        modulus_mask=config.fixed_point.mask)
        masked = (self._encoded + mask) & config.fixed_point.mask
        return [Outgoing(config.server, MaskedInput(round=config.round, attempt=msg.attempt,
                                                    values=masked.view(np.int64)))]

    def _on_result(self, msg: AggregateResult) -> list[Outgoing]:
        if msg.round != self.config.round or msg.attempt != self._attempt or len(msg.values) != self.config.length:
            raise ProtocolError("secure aggregation: a result for another round, attempt or length")
        members = tuple(self.config.clients[i] for i in sorted(self._members or ()))
        self.result = Aggregate(mean=msg.values.copy(), total_weight=msg.total_weight,
                                quantized_sum=np.zeros(0, np.int64), members=members, attempt=msg.attempt)
        self.done = True
        return []


class SecAggServer:
    """The federated server's side of one aggregation (sans-IO): relays keys, sums masked inputs, redoes on drops.

    Its :attr:`result` holds the exact ``quantized_sum``; clients get only the mean.
    """

    def __init__(self, config: SecAggConfig) -> None:
        self.config = config
        self.alive: list[str] = list(config.clients)
        self.keys: dict[str, bytes] = {}
        self.attempt = -1  # -1: collecting keys
        self.members: tuple[str, ...] = ()
        self.inputs: dict[str, np.ndarray] = {}
        self.done = False
        self.result: Aggregate | None = None

    def start(self) -> list[Outgoing]:
        """Nothing to send before the keys arrive."""
        return []

    def expects(self, peer: str) -> bool:
        """True while this server still needs ``peer``'s key or masked input."""
        if self.done or peer not in self.alive:
            return False
        return peer not in self.keys if self.attempt < 0 else (peer in self.members and peer not in self.inputs)

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take a client's public key or masked input."""
        if self.done:
            raise ProtocolError(f"secure aggregation: {type(msg).__name__} from {sender} after the result")
        if sender not in self.alive:
            raise ProtocolError(f"secure aggregation: {sender!r} is not a live client of this aggregation")
        if isinstance(msg, PublicKey):
            if self.attempt >= 0 or sender in self.keys or msg.round != self.config.round:
                raise ProtocolError(f"secure aggregation: unexpected public key from {sender}")
            self.keys[sender] = msg.key.tobytes()
            return self._maybe_roster()
        if isinstance(msg, MaskedInput):
            if msg.round != self.config.round or msg.attempt > self.attempt:
                raise ProtocolError(f"secure aggregation: masked input from {sender} for a future attempt")
            if msg.attempt < self.attempt:
                return []  # from an abandoned attempt: its masks never cancel, drop it
            if sender not in self.members or sender in self.inputs:
                raise ProtocolError(f"secure aggregation: unexpected masked input from {sender}")
            if len(msg.values) != self.config.length + 1:
                raise ProtocolError(f"secure aggregation: {sender} sent {len(msg.values)} words, "
                                    f"not {self.config.length + 1}")
            self.inputs[sender] = msg.values.view(np.uint64)
            return self._maybe_finish()
        raise ProtocolError(f"secure aggregation: the server does not take {type(msg).__name__}")

    def drop(self, client: str) -> list[Outgoing]:
        """The driver saw ``client`` go (closed, timed out): continue without it, redoing the attempt if needed.

        Raises:
            ProtocolError: fewer than ``min_clients`` clients would be left.
        """
        if self.done or client not in self.alive:
            return []
        if self.attempt >= 0 and client in self.inputs:
            self.alive.remove(client)  # its masked input is in: this attempt still completes
            return []
        self.alive.remove(client)
        self.keys.pop(client, None)
        if len(self.alive) < self.config.min_clients:
            raise ProtocolError(f"secure aggregation: {client} dropped and {len(self.alive)} clients are left, "
                                f"below the {self.config.min_clients} required", local=True)
        if self.attempt < 0:
            return self._maybe_roster()
        if client not in self.members:
            return []
        return self._roster()

    def admit(self, client: str) -> bool:
        """Take ``client`` (one of the configured clients, dropped before) back in while keys are still being
        collected; whether it was taken (after the first roster it cannot be)."""
        if self.done or self.attempt >= 0 or client not in self.config.clients:
            return False
        if client not in self.alive:
            self.alive = [c for c in self.config.clients if c in self.alive or c == client]
        return True

    def _maybe_roster(self) -> list[Outgoing]:
        if self.attempt >= 0 or any(name not in self.keys for name in self.alive):
            return []
        if len(self.alive) < self.config.min_clients:
            raise ProtocolError("secure aggregation: too few clients sent keys", local=True)
        return self._roster()

    def _roster(self) -> list[Outgoing]:
        """Start the next attempt with every live client (keys in hand) as a member."""
        self.attempt += 1
        self.members = tuple(name for name in self.config.clients if name in self.alive)
        self.inputs = {}
        indices = np.array([self.config.index(name) for name in self.members], dtype=np.int64)
        keys = np.stack([np.frombuffer(self.keys[name], dtype=np.uint8) for name in self.members])
        roster = Roster(round=self.config.round, attempt=self.attempt, members=indices, keys=keys)
        return [Outgoing(name, roster) for name in self.members]

    def _maybe_finish(self) -> list[Outgoing]:
        if any(name not in self.inputs for name in self.members):
            return []
        fp = self.config.fixed_point
        total = np.zeros(self.config.length + 1, dtype=np.uint64)
        for name in self.members:
            total += self.inputs[name]
        self.result = _aggregate(total & fp.mask, fp, members=self.members, attempt=self.attempt)
        self.done = True
        reply = AggregateResult(round=self.config.round, attempt=self.attempt,
                                total_weight=self.result.total_weight, values=self.result.mean)
        return [Outgoing(name, reply) for name in self.members if name in self.alive]


def run_in_memory(
    server: SecAggServer, clients: Mapping[str, SecAggClient], *, drop_before_input: Sequence[str] = ()
) -> Aggregate:
    """Drive one aggregation in one process, passing message objects (for notebooks, tests and examples).

    ``drop_before_input`` names clients that send their key and then vanish before their masked input.
    """
    queue: list[tuple[str, Outgoing]] = []
    for name, client in clients.items():
        queue += [(name, out) for out in client.start()]
    gone: set[str] = set()
    while queue:
        sender, out = queue.pop(0)
        if out.to == server.config.server:
            if sender in gone:
                continue
            if isinstance(out.message, MaskedInput) and sender in drop_before_input:
                gone.add(sender)
                queue += [(server.config.server, reply) for reply in server.drop(sender)]
                continue
            queue += [(server.config.server, reply) for reply in server.receive(sender, out.message)]
        elif out.to not in gone:
            queue += [(out.to, reply) for reply in clients[out.to].receive(sender, out.message)]
    if server.result is None:
        raise ProtocolError("secure aggregation: the exchange ended without a result", local=True)
    return server.result
