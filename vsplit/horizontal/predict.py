"""Scoring a bank's own customers with a trained horizontal split: the bank's segments, then the server's.

Theory of operation. After training, each bank holds its client segments and the server holds its own (SplitFed: the
last average; sequential: the last bank's hand-off is the final client segment). To score new customers a bank runs
its bottom segment on its rows and sends the cut activations to the server in batches (:class:`ForwardRequest`).
The server runs its segments on them and sends the result back (:class:`ForwardReply`). In a vanilla split the
result is the model's output. In a U-shaped split it is the middle's output, and the bank runs its head on it, so the
server never sees a score. The server learns what training taught it already: the cut activations and, in a vanilla
split, the outputs. A bank's rows, IDs and scores (U-shaped) stay with it. In FedAvg every bank holds the whole model
and scores alone.

Sans-IO, like every machine: :class:`ScoreClient` (a bank) and :class:`ScoreServer` (the server, one per bank, under
the hub). A bank keeps at most ``window`` requests in flight; the server checks each request's batch number, width,
size and values before running anything.

Example:
    >>> import numpy as np
    >>> client = ScoreClient("server", [np.ones((2, 3), np.float32)] * 3, window=2)
    >>> server = ScoreServer(lambda x: x.sum(axis=1, keepdims=True), width=3)
    >>> out = client.start()
    >>> while not server.done:
    ...     replies = [r for o in out for r in server.receive("bank", o.message)]
    ...     out = [o for r in replies for o in client.receive("server", r.message)]
    >>> [b.ravel().tolist() for b in client.result], server.done, server.rows
    ([[3.0, 3.0], [3.0, 3.0], [3.0, 3.0]], True, 6)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, all_finite, message, require, require_array

#: Rows in one request at most (the frame-size cap bounds its bytes too).
MAX_ROWS = 65_536


@message(0x0406)
@dataclass(frozen=True)
class ForwardRequest(Message):
    """Batch ``batch`` of a bank's cut activations (rows x width, float32)."""

    batch: int
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.batch >= 0, "batch is a non-negative number")
        require_array("values", self.values, dtype="float32", ndim=2)
        require(0 < len(self.values) <= MAX_ROWS, f"1 to {MAX_ROWS} rows in a request")
        require(all_finite(self.values), "values must be finite")


@message(0x0407)
@dataclass(frozen=True)
class ForwardReply(Message):
    """The server's segments' output for batch ``batch`` (rows x width, float32)."""

    batch: int
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.batch >= 0, "batch is a non-negative number")
        require_array("values", self.values, dtype="float32", ndim=2)


@message(0x0408)
@dataclass(frozen=True)
class ScoringDone(Message):
    """The bank sent all its ``batches`` requests and has every reply."""

    batches: int

    def __post_init__(self) -> None:
        require(self.batches >= 0, "batches is a non-negative number")


class ScoreClient:
    """A bank: sends ``batches`` (its cut activations) to ``server``, at most ``window`` ahead; ``result``: the
    replies' values, in order."""

    def __init__(self, server: str, batches: Sequence[np.ndarray], *, window: int = 4) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self.server, self.batches, self.window = server, list(batches), window
        self.replies: list[np.ndarray] = []
        self._sent = 0
        self.done = False
        self.result: list[np.ndarray] | None = None

    def start(self) -> list[Outgoing]:
        if not self.batches:
            return self._finish()
        return self._send(min(self.window, len(self.batches)))

    def expects(self, peer: str) -> bool:
        return not self.done and peer == self.server

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if not self.expects(sender) or not isinstance(msg, ForwardReply) or msg.batch != len(self.replies):
            raise ProtocolError(f"scoring: {type(msg).__name__} from {sender!r} not expected now")
        if len(msg.values) != len(self.batches[msg.batch]):
            raise ProtocolError(f"scoring: the reply to batch {msg.batch} has {len(msg.values)} rows, not "
                                f"{len(self.batches[msg.batch])}")
        self.replies.append(msg.values)
        if len(self.replies) == len(self.batches):
            return self._finish()
        return self._send(1) if self._sent < len(self.batches) else []

    def _send(self, n: int) -> list[Outgoing]:
        out = [Outgoing(self.server, ForwardRequest(batch=i, values=np.ascontiguousarray(self.batches[i], np.float32)))
               for i in range(self._sent, self._sent + n)]
        self._sent += n
        return out

    def _finish(self) -> list[Outgoing]:
        self.done, self.result = True, self.replies
        return [Outgoing(self.server, ScoringDone(batches=len(self.batches)))]


class ScoreServer:
    """The server's side for one bank: ``forward`` (its segments) on each request of ``width`` columns, in order."""

    def __init__(self, forward: Callable[[np.ndarray], np.ndarray], *, width: int) -> None:
        self.forward, self.width = forward, width
        self.batches = 0
        self.rows = 0
        self.done = False
        self.result: int | None = None

    def start(self) -> list[Outgoing]:
        return []

    def expects(self, peer: str) -> bool:
        return not self.done

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if self.done:
            raise ProtocolError(f"scoring: {type(msg).__name__} from {sender!r} after it was done")
        if isinstance(msg, ScoringDone):
            if msg.batches != self.batches:
                raise ProtocolError(f"scoring: {sender!r} says {msg.batches} batches, this server answered "
                                    f"{self.batches}")
            self.done, self.result = True, self.rows
            return []
        if not isinstance(msg, ForwardRequest) or msg.batch != self.batches:
            raise ProtocolError(f"scoring: {type(msg).__name__} from {sender!r} not expected now")
        if msg.values.shape[1] != self.width:
            raise ProtocolError(f"scoring: {sender!r} sent {msg.values.shape[1]} values per row, the cut has "
                                f"{self.width}")
        out = np.ascontiguousarray(self.forward(msg.values), np.float32)
        self.batches += 1
        self.rows += len(msg.values)
        return [Outgoing(sender, ForwardReply(batch=msg.batch, values=out.reshape(len(msg.values), -1)))]


__all__ = ["ForwardReply", "ForwardRequest", "ScoreClient", "ScoreServer", "ScoringDone"]
