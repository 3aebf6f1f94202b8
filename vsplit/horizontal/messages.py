"""The messages of horizontal schedules: a segment's state, in clear or sealed for one client. Type codes 0x0401–0x04FF.

:class:`SegmentState` carries a dict of named tensors (a client segment's weights, buffers and optimizer state, or
their average) as one raw little-endian byte buffer with each tensor's name, dtype code and shape beside it. Its
constructor checks every count and byte size before anything is read, so :meth:`SegmentState.arrays` never reads
past the buffer, allocates only what was declared, and refuses non-finite floats. Nothing is ever unpickled: a peer
cannot make this party run code, only send numbers of the agreed names and shapes (checked again where they are
loaded, :mod:`vsplit.horizontal.state`).

Example:
    >>> import numpy as np
    >>> msg = SegmentState.pack(round=0, rows=3, arrays={"w/bottom/weight": np.ones((2, 2), np.float32)})
    >>> {k: v.shape for k, v in msg.arrays().items()}
    {'w/bottom/weight': (2, 2)}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vsplit.protocol.message import Message, all_finite, message, require, require_array

#: Tensor dtypes a state may hold, by wire code (only ever appended to).
STATE_DTYPES: tuple[np.dtype, ...] = tuple(np.dtype(n).newbyteorder("<") for n in ("float32", "float64", "int64"))
_CODE = {dtype.newbyteorder("="): i for i, dtype in enumerate(STATE_DTYPES)}
MAX_TENSORS = 4096
MAX_RANK = 8
#: Names are joined by this character, which no state-dict key contains.
SEP = "\n"


@message(0x0401)
@dataclass(frozen=True)
class SegmentState(Message):
    """Named tensors: ``names`` (joined by newlines), per tensor a dtype code and a rank, all shapes' dimensions
    back to back in ``dims``, and all tensors' bytes back to back in ``data``. ``rows``: the rows the sender
    trained on (the weight of its state in an average)."""

    round: int
    rows: int
    names: str
    dtypes: np.ndarray
    ranks: np.ndarray
    dims: np.ndarray
    data: np.ndarray

    def __post_init__(self) -> None:
        require(self.round >= 0 and self.rows >= 0, "round and rows must be non-negative")
        for field, dtype in (("dtypes", "uint8"), ("ranks", "uint8"), ("dims", "int64"), ("data", "uint8")):
            require_array(field, getattr(self, field), dtype=dtype, ndim=1)
        names = self.names.split(SEP) if self.names else []
        n = len(names)
        require(n <= MAX_TENSORS, f"at most {MAX_TENSORS} tensors in a state, got {n}")
        require(len(self.dtypes) == n and len(self.ranks) == n, "one dtype code and one rank per name")
        require(len(set(names)) == n and all(names), "tensor names must be unique and non-empty")
        require(bool((self.dtypes < len(STATE_DTYPES)).all()), "unknown tensor dtype code")
        require(bool((self.ranks <= MAX_RANK).all()), f"tensor ranks must be at most {MAX_RANK}")
        require(int(self.ranks.sum()) == len(self.dims), "dims must hold every tensor's shape, back to back")
        require(bool((self.dims >= 0).all()) and bool((self.dims < 2**40).all()), "dimensions out of range")
        total, pos = 0, 0
        for code, rank in zip(self.dtypes.tolist(), self.ranks.tolist(), strict=True):
            total += math.prod(self.dims[pos : pos + rank].tolist()) * STATE_DTYPES[code].itemsize
            pos += rank
        require(total == len(self.data), f"the shapes declare {total} bytes, the data holds {len(self.data)}")

    @classmethod
    def pack(cls, *, round: int, rows: int, arrays: Mapping[str, np.ndarray]) -> SegmentState:
        """Build one from named arrays (float32, float64 or int64)."""
        names, codes, ranks, dims, chunks = [], [], [], [], []
        for name, value in arrays.items():
            value = np.asarray(value, order="C")  # not ascontiguousarray: it turns a 0-d array into 1-d
            code = _CODE.get(value.dtype)
            require(code is not None and SEP not in name, f"tensor {name!r}: dtype {value.dtype} or name not allowed")
            names.append(name)
            codes.append(code)
            ranks.append(value.ndim)
            dims.extend(value.shape)
            chunks.append(value.astype(STATE_DTYPES[code], copy=False).reshape(-1).view(np.uint8))
        data = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
        return cls(round=round, rows=rows, names=SEP.join(names), dtypes=np.array(codes, np.uint8),
                   ranks=np.array(ranks, np.uint8), dims=np.array(dims, np.int64), data=data)

    def arrays(self) -> dict[str, np.ndarray]:
        """The named arrays (copies in native byte order); a :class:`ProtocolError` on a non-finite float."""
        out: dict[str, np.ndarray] = {}
        offset, pos = 0, 0
        names = self.names.split(SEP) if self.names else []
        for name, code, rank in zip(names, self.dtypes.tolist(), self.ranks.tolist(), strict=True):
            dtype = STATE_DTYPES[code]
            shape = tuple(self.dims[pos : pos + rank].tolist())
            size = math.prod(shape) * dtype.itemsize
            value = self.data[offset : offset + size].view(dtype).reshape(shape).astype(dtype.newbyteorder("="))
            if dtype.kind == "f":
                require(bool(all_finite(value.reshape(1, -1))) if value.size else True,
                        f"tensor {name!r} holds non-finite values")
            out[name] = value
            offset += size
            pos += rank
        return out


@message(0x0402)
@dataclass(frozen=True)
class SealedState(Message):
    """A :class:`SegmentState` encrypted from client ``sender`` to client ``recipient`` (AES-256-GCM under X25519
    agreements, see :mod:`vsplit.horizontal.sealed`): what the server relays without being able to read it."""

    round: int
    sender: str
    recipient: str
    ephemeral: np.ndarray
    nonce: np.ndarray
    ciphertext: np.ndarray

    def __post_init__(self) -> None:
        require(self.round >= 0, "round must be non-negative")
        require(0 < len(self.sender) <= 64 and 0 < len(self.recipient) <= 64, "party names must be 1 to 64 characters")
        require_array("ephemeral", self.ephemeral, dtype="uint8", ndim=1)
        require_array("nonce", self.nonce, dtype="uint8", ndim=1)
        require_array("ciphertext", self.ciphertext, dtype="uint8", ndim=1)
        require(len(self.ephemeral) == 32 and len(self.nonce) == 12, "an X25519 key has 32 bytes, a nonce 12")
        require(len(self.ciphertext) >= 16, "a ciphertext holds at least its 16-byte tag")
