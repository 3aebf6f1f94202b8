"""The messages of split training. Type codes 0x0100–0x01FF.

What crosses between parties: the coordinator's plan (which aligned rows train and which validate, plus the shared
schedule), the activations of each cut, their gradients, and an end-of-epoch signal; first, each party's Ready with
its topology fingerprint. No record ID, feature value or label is ever a field.

Activations and gradients travel as float32 (:class:`Activations`, :class:`Gradients`) or compressed by the
sender's codec (:mod:`vsplit.protocol.training.compression`): :class:`PackedActivations` and
:class:`PackedGradients` carry a dense tensor in a narrower dtype (float16, bfloat16 bit patterns, int8 with one
float32 scale per row), :class:`SparseGradients` the top-k entries of each row of a gradient. Their constructors
refuse every inconsistency (dtype, sizes, scales, indices, non-finite values) before anything is decoded, so a
decoded tensor never needs more memory than its declared shape.

Example:
    >>> import numpy as np
    >>> Activations(cut=0, slot=0, phase=TRAIN, epoch=0, step=0, values=np.zeros((2, 4), np.float32)).values.shape
    (2, 4)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.message import Message, all_finite, message, require, require_array

#: Embedding phases.
TRAIN, EVAL, PREDICT = 0, 1, 2
FLOAT32 = np.dtype("float32")
FLOAT16 = np.dtype("float16")
UINT32 = np.dtype("uint32")
#: Row roles in a plan.
ROLE_TRAIN, ROLE_VALID, ROLE_UNUSED = 0, 1, 2
#: The most training steps a party may run ahead of the gradients (pipeline window or local steps).
MAX_AHEAD = 64


@message(0x0101)
@dataclass(frozen=True)
class TrainingPlan(Message):
    """Coordinator -> every party: the agreed schedule and each aligned row's role (``predict``: score every row;
    ``then_score``: joint scoring of a test table follows training)."""

    epochs: int
    batch_size: int
    seed: int
    eval_chunk: int
    start_epoch: int
    predict: bool
    then_score: bool
    roles: np.ndarray
    #: training steps a source party may have in flight (1: exact; see vsplit.protocol.training.pipeline)
    window: int = 1
    #: training steps per exchange with cached peer tensors (1: exact)
    local_steps: int = 1

    def __post_init__(self) -> None:
        require(self.epochs >= 1, "epochs must be at least 1")
        require(1 <= self.window <= MAX_AHEAD, f"window must be 1 to {MAX_AHEAD}")
        require(1 <= self.local_steps <= MAX_AHEAD, f"local_steps must be 1 to {MAX_AHEAD}")
        require(self.window == 1 or self.local_steps == 1, "pipelining and local steps do not combine")
        require(self.batch_size >= 1, "batch_size must be at least 1")
        require(self.eval_chunk >= 1, "eval_chunk must be at least 1")
        require(0 <= self.start_epoch <= self.epochs, "start_epoch out of range")
        require(self.seed >= 0, "seed must be non-negative")
        require_array("roles", self.roles, dtype="uint8", ndim=1)
        require(bool((self.roles <= ROLE_UNUSED).all()), "roles must be 0 (train), 1 (valid) or 2 (unused)")


@message(0x0102)
@dataclass(frozen=True)
class Activations(Message):
    """The output of a segment crossing cut ``cut`` (tensor ``slot`` of it) for one batch or evaluation chunk."""

    cut: int
    slot: int
    phase: int
    epoch: int
    step: int
    values: np.ndarray

    def __post_init__(self) -> None:  # plain ifs: this runs at least twice per training step
        if self.phase not in (TRAIN, EVAL, PREDICT):
            raise ProtocolError(f"unknown phase {self.phase}")
        if self.epoch < 0 or self.step < 0 or self.cut < 0 or self.slot < 0:
            raise ProtocolError("cut, slot, epoch and step must be non-negative")
        if type(self.values) is not np.ndarray or self.values.dtype != FLOAT32 or self.values.ndim < 2:
            require_array("values", self.values, dtype=FLOAT32)
            raise ProtocolError(f"field 'values' must have at least 2 dimensions, got shape {self.values.shape}")


@message(0x0103)
@dataclass(frozen=True)
class Gradients(Message):
    """The loss gradient with respect to tensor ``slot`` of the activations that crossed cut ``cut``."""

    cut: int
    slot: int
    epoch: int
    step: int
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.step < 0 or self.cut < 0 or self.slot < 0:
            raise ProtocolError("cut, slot, epoch and step must be non-negative")
        if type(self.values) is not np.ndarray or self.values.dtype != FLOAT32 or self.values.ndim < 2:
            require_array("values", self.values, dtype=FLOAT32)
            raise ProtocolError(f"field 'values' must have at least 2 dimensions, got shape {self.values.shape}")


@message(0x0104)
@dataclass(frozen=True)
class EpochEnd(Message):
    """Coordinator -> every party: validation done; keep this epoch's weights if ``improved``; stop if ``stop``."""

    epoch: int
    improved: bool
    stop: bool

    def __post_init__(self) -> None:
        require(self.epoch >= 0, "epoch must be non-negative")


@message(0x0105)
@dataclass(frozen=True)
class Ready(Message):
    """Every party -> the coordinator (the label owner), first: ready to train or score. ``resume_epoch`` is the last
    epoch it has a checkpoint of (-1: none); the coordinator resumes everyone from the oldest epoch all parties have.
    ``topology`` is the sender's topology fingerprint: parties configured with different splits refuse each other.
    ``network`` of ``networks``: which network of a bag this machine trains or scores (``train.networks``); parties
    configured with bags of other sizes refuse each other too."""

    resume_epoch: int
    topology: str
    network: int = 0
    networks: int = 1

    def __post_init__(self) -> None:
        require(self.resume_epoch >= -1, "resume_epoch must be -1 or more")
        require(0 < len(self.topology) <= 64, "topology fingerprint must be 1 to 64 characters")
        require(0 <= self.network < self.networks, "network must be 0 to networks - 1")


#: Codes of the dense codecs a :class:`PackedActivations` / :class:`PackedGradients` may use (0 is plain float32,
#: which travels as :class:`Activations` / :class:`Gradients`), and the dtype of their ``data``.
CODEC_FLOAT16, CODEC_BFLOAT16, CODEC_INT8 = 1, 2, 3
PACKED_DTYPES: dict[int, np.dtype] = {
    CODEC_FLOAT16: FLOAT16, CODEC_BFLOAT16: np.dtype("uint16"), CODEC_INT8: np.dtype("int8")
}
#: The largest int8 scale whose 127 multiples are finite float32 values.
MAX_INT8_SCALE = float(np.finfo(np.float32).max) / 127
#: Bound on the entries of one row of a sparse gradient (indices are uint32).
MAX_SPARSE_WIDTH = 2**32
#: Entries checked at a time: validating a peer's array needs no temporary larger than this many entries.
_CHUNK = 1 << 14


def _holds(values: np.ndarray, test: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Whether ``test`` holds for ``values`` (at least 2-d, flattened to rows), checked a chunk of rows at a time."""
    if values.size == 0:
        return True
    rows = values.reshape(len(values), -1)
    step = max(1, _CHUNK // max(1, rows.shape[1]))
    return all(bool(test(rows[i : i + step]).all()) for i in range(0, len(rows), step))


def _check_header(cut: int, slot: int, epoch: int, step: int) -> None:
    if epoch < 0 or step < 0 or cut < 0 or slot < 0:
        raise ProtocolError("cut, slot, epoch and step must be non-negative")


def _check_packed(codec: int, data: np.ndarray, scales: np.ndarray) -> None:
    """A dense packed tensor: ``data`` of the codec's dtype, at least 2-d; int8 has one finite scale per row."""
    dtype = PACKED_DTYPES.get(codec)
    if dtype is None:
        raise ProtocolError(f"unknown codec {codec}; known: {sorted(PACKED_DTYPES)}")
    require_array("data", data, dtype=dtype)
    require_array("scales", scales, dtype=FLOAT32, ndim=1)
    require(data.ndim >= 2, f"field 'data' must have at least 2 dimensions, got shape {data.shape}")
    if codec == CODEC_INT8:
        require(scales.shape == data.shape[:1], f"int8 needs one scale per row: {scales.size} for {len(data)} rows")
        require(bool(all_finite(scales)) and bool((scales >= 0).all()) and bool((scales <= MAX_INT8_SCALE).all()),
                "int8 scales must be finite, non-negative and at most float32 max / 127")
        require(data.size == 0 or int(data.min()) >= -127, "int8 data must lie in [-127, 127]")
        return
    require(scales.size == 0, f"codec {codec} carries no scales, got {scales.size}")
    if codec == CODEC_FLOAT16:
        require(_holds(data, np.isfinite), "float16 data must be finite")
    else:  # bfloat16 bit patterns: an all-ones exponent is an infinity or a NaN
        require(_holds(data, lambda c: np.bitwise_and(c, 0x7F80) != 0x7F80), "bfloat16 data must be finite")


@message(0x0106)
@dataclass(frozen=True)
class PackedActivations(Message):
    """:class:`Activations` compressed by a dense codec: ``data`` has the tensor's shape in the codec's dtype,
    ``scales`` one float32 per row for int8 (empty otherwise).

    >>> PackedActivations(cut=0, slot=0, phase=TRAIN, epoch=0, step=0, codec=CODEC_FLOAT16,
    ...                   data=np.ones((2, 3), np.float16), scales=np.zeros(0, np.float32)).data.shape
    (2, 3)
    """

    cut: int
    slot: int
    phase: int
    epoch: int
    step: int
    codec: int
    data: np.ndarray
    scales: np.ndarray

    def __post_init__(self) -> None:
        if self.phase not in (TRAIN, EVAL, PREDICT):
            raise ProtocolError(f"unknown phase {self.phase}")
        _check_header(self.cut, self.slot, self.epoch, self.step)
        _check_packed(self.codec, self.data, self.scales)


@message(0x0107)
@dataclass(frozen=True)
class PackedGradients(Message):
    """:class:`Gradients` compressed by a dense codec (fields as in :class:`PackedActivations`)."""

    cut: int
    slot: int
    epoch: int
    step: int
    codec: int
    data: np.ndarray
    scales: np.ndarray

    def __post_init__(self) -> None:
        _check_header(self.cut, self.slot, self.epoch, self.step)
        _check_packed(self.codec, self.data, self.scales)


@message(0x0108)
@dataclass(frozen=True)
class SparseGradients(Message):
    """The ``k`` largest-magnitude entries of each row of a gradient of shape ``shape`` (int64, rank 2 to 4),
    rows flattened to ``(shape[0], -1)``: ``values`` (float32 or float16) and their column ``indices`` (uint32,
    strictly increasing within a row), both ``(rows, k)`` with ``1 <= k <= width``; the other entries are 0.

    >>> SparseGradients(cut=0, slot=0, epoch=0, step=0, shape=np.array([1, 4]),
    ...                 values=np.array([[2.0]], np.float32), indices=np.array([[3]], np.uint32)).shape.tolist()
    [1, 4]
    """

    cut: int
    slot: int
    epoch: int
    step: int
    shape: np.ndarray
    values: np.ndarray
    indices: np.ndarray

    def __post_init__(self) -> None:
        _check_header(self.cut, self.slot, self.epoch, self.step)
        require_array("shape", self.shape, dtype="int64", ndim=1)
        require(2 <= self.shape.size <= 4, f"field 'shape' must have 2 to 4 entries, got {self.shape.size}")
        dims = self.shape.tolist()
        require(dims[0] >= 0 and min(dims[1:]) >= 1, f"shape {dims}: rows must be >= 0 and other dimensions >= 1")
        width = math.prod(dims[1:])
        require(width <= MAX_SPARSE_WIDTH, f"shape {dims}: rows wider than {MAX_SPARSE_WIDTH} entries")
        if type(self.values) is not np.ndarray or self.values.dtype not in (FLOAT32, FLOAT16):
            raise ProtocolError("field 'values' must be a float32 or float16 array")
        require_array("indices", self.indices, dtype=UINT32, ndim=2)
        rows, k = self.indices.shape
        require(self.values.shape == (rows, k), f"values {self.values.shape} and indices {(rows, k)} differ")
        require(rows == dims[0] and 1 <= k <= width, f"(rows, k) = {(rows, k)} does not fit shape {dims}")
        require(_holds(self.values, np.isfinite), "sparse gradient values must be finite")
        if rows:
            require(int(self.indices[:, -1].max()) < width, f"an index is not below the width {width}")
            require(_holds(self.indices, lambda c: c[:, 1:] > c[:, :-1]),
                    "indices must be strictly increasing within each row (no duplicates)")
