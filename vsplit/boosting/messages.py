"""The boosting messages (type codes 0x0D01-0x0D0B). Each checks its own shape; none carries a plaintext gradient,
label, bin edge or raw value.

Training: the label party sends :class:`BoostHello` (its public key and the fixed point); each partner answers
:class:`BoostReady` (how many columns and codes per column it has, nothing else). Per tree the label party sends
:class:`Gradients` (one ciphertext a row); per level :class:`Level` (each row's node, -1 for rows in no node to split);
the partner answers :class:`Histograms` (packed ciphertext sums per node, column and bin). Where a partner's
candidate wins, the label party sends :class:`Record` (node, column, threshold bin, missing direction: positions in
the partner's own binning) and the partner answers :class:`Assigned` (its record ids and the left flag of each row of
those nodes). :class:`Finish` ends the run. Prediction: :class:`Ask` (how many rows, from which record),
:class:`Decisions` (one bit per row and record asked).

With ``BoostParams.order_categories`` the hello asks which partner columns are categorical, and after the first
tree's root histograms the label party sends :class:`Order` (each such column's codes renumbered by its own label
rate) before any :class:`Record`.

A ciphertext field holds a :mod:`vsplit.he.wire` message as bytes; here it is checked for size and magic, and the
machine then reads it with the run's key and the count the protocol expects (:func:`vsplit.he.decode_ciphertexts`).

Example:
    >>> import numpy as np
    >>> Level(tree=0, depth=0, nodes=np.zeros(3, np.int32)).nodes.tolist()
    [0, 0, 0]
    >>> Gradients(tree=0, frame=np.zeros(4, np.uint8))
    Traceback (most recent call last):
    ...
    vsplit.errors.ProtocolError: Gradients.frame: 4 bytes, not a ciphertext message
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vsplit.he import MAX_MESSAGE_BYTES
from vsplit.protocol.message import Message, message, require, require_array

VERSION = 3
#: the most rows one run takes (a ciphertext message of 2**24 OU-2048 rows is already 4 GiB)
MAX_ROWS = 1 << 24
#: deepest tree: node ids stay below 2**(MAX_DEPTH + 1)
MAX_DEPTH = 16
MAX_TREES = 10_000
#: the header of a ciphertext message: b"VHC1", fingerprint, scheme, count, width (vsplit.he.wire)
CIPHER_HEADER_BYTES = _CIPHER_HEADER = 19


def _frame(owner: str, frame: np.ndarray) -> None:
    require_array(f"{owner}.frame", frame, dtype="uint8", ndim=1)
    require(_CIPHER_HEADER < len(frame) <= MAX_MESSAGE_BYTES and bytes(frame[:4]) == b"VHC1",
            f"{owner}.frame: {len(frame)} bytes, not a ciphertext message")


def _step(owner: str, tree: int, depth: int = 0) -> None:
    require(0 <= tree < MAX_TREES, f"{owner}.tree out of range: {tree}")
    require(0 <= depth < MAX_DEPTH, f"{owner}.depth out of range: {depth}")


def _rows(owner: str, name: str, value: np.ndarray, dtype: str) -> None:
    require_array(f"{owner}.{name}", value, dtype=dtype, ndim=1)
    require(0 < len(value) <= MAX_ROWS, f"{owner}.{name}: {len(value)} rows, not 1..{MAX_ROWS}")


@message(0x0D01)
@dataclass(frozen=True)
class BoostHello(Message):
    """The label party's public key message (:meth:`vsplit.he.PublicKey.to_bytes`) and fixed point."""

    version: int
    rows: int
    scale: int
    slot_bits: int
    key: np.ndarray
    #: 1: the label party will order the partner's categorical codes (:class:`Order`), so asks which columns are
    #: categorical (``BoostReady.categorical``)
    order: int = 0

    def __post_init__(self) -> None:
        require(0 < self.rows <= MAX_ROWS, f"BoostHello.rows out of range: {self.rows}")
        require(self.order in (0, 1), f"BoostHello.order: {self.order}, not 0 or 1")
        require(1 <= self.scale <= 2**30 and 2 <= self.slot_bits <= 63, "BoostHello: scale or slot bits out of range")
        require_array("BoostHello.key", self.key, dtype="uint8", ndim=1)
        require(0 < len(self.key) <= 8192, f"BoostHello.key: {len(self.key)} bytes")


@message(0x0D02)
@dataclass(frozen=True)
class BoostReady(Message):
    """A partner's shape: its number of columns and codes per column (value bins + missing); where the hello asked
    (``BoostHello.order``), 1 per categorical column in ``categorical`` (empty otherwise)."""

    columns: int
    width: int
    categorical: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self) -> None:
        require(1 <= self.columns <= 100_000 and 3 <= self.width <= 256, "BoostReady: columns or width out of range")
        require_array("BoostReady.categorical", self.categorical, dtype="uint8", ndim=1)
        require(len(self.categorical) in (0, self.columns) and int(self.categorical.max(initial=0)) <= 1,
                "BoostReady.categorical: not one 0/1 flag per column")


@message(0x0D03)
@dataclass(frozen=True)
class Gradients(Message):
    """Tree ``tree``'s packed gradient and hessian, one ciphertext a row; with GOSS ``sample`` is 1 for the rows
    that carry one (in row order) and 0 for the others, which take no part in the tree's sums (empty: every row)."""

    tree: int
    frame: np.ndarray
    sample: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self) -> None:
        _step("Gradients", self.tree)
        _frame("Gradients", self.frame)
        require_array("Gradients.sample", self.sample, dtype="uint8", ndim=1)
        require(len(self.sample) <= MAX_ROWS and (not len(self.sample) or int(self.sample.max()) == 1),
                "Gradients.sample: more rows than a run takes, or no row sampled, or a flag other than 0/1")


@message(0x0D04)
@dataclass(frozen=True)
class Level(Message):
    """Each row's node at ``depth`` of tree ``tree`` (heap ids), -1 where the row is in no node to split."""

    tree: int
    depth: int
    nodes: np.ndarray

    def __post_init__(self) -> None:
        _step("Level", self.tree, self.depth)
        _rows("Level", "nodes", self.nodes, "int32")
        require(int(self.nodes.min()) >= -1 and int(self.nodes.max()) < 2 ** (self.depth + 1) - 1,
                f"Level.nodes: a node id outside depth {self.depth}")
        require(int(self.nodes.max()) >= 2**self.depth - 1, "Level.nodes: no node to split")


@message(0x0D05)
@dataclass(frozen=True)
class Histograms(Message):
    """Packed sums of the level just asked, of the nodes the partner sums (:func:`vsplit.boosting.gains.
    summed_directly`) in increasing id order: per (node, column, code) ``cells`` says 0 (no row: a zero sum),
    1 (its sum is in ``frame``, in cell order) or 2 (the rest of the node: its total minus the column's other
    cells, which the label party knows). Empty ``cells``: every cell is in ``frame``."""

    tree: int
    depth: int
    frame: np.ndarray
    cells: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))

    def __post_init__(self) -> None:
        _step("Histograms", self.tree, self.depth)
        _frame("Histograms", self.frame)
        require_array("Histograms.cells", self.cells, dtype="uint8", ndim=1)
        require(not len(self.cells) or int(self.cells.max()) <= 2, "Histograms.cells: a state other than 0, 1, 2")


@message(0x0D06)
@dataclass(frozen=True)
class Record(Message):
    """Record these winning splits: per node, the partner's column, threshold code and missing direction."""

    tree: int
    depth: int
    nodes: np.ndarray
    columns: np.ndarray
    bins: np.ndarray
    missing_left: np.ndarray

    def __post_init__(self) -> None:
        _step("Record", self.tree, self.depth)
        for name, dtype in (("nodes", "int32"), ("columns", "int32"), ("bins", "int32"), ("missing_left", "uint8")):
            require_array(f"Record.{name}", getattr(self, name), dtype=dtype, ndim=1)
        count = len(self.nodes)
        require(0 < count <= 2**self.depth, f"Record: {count} nodes at depth {self.depth}")
        require(all(len(getattr(self, n)) == count for n in ("columns", "bins", "missing_left")),
                "Record: fields of different lengths")
        require(len(np.unique(self.nodes)) == count, "Record: a node twice")
        require(bool(((self.nodes >= 2**self.depth - 1) & (self.nodes < 2 ** (self.depth + 1) - 1)).all()),
                f"Record.nodes: a node id outside depth {self.depth}")
        require(bool((self.columns >= 0).all() and (self.bins >= 0).all() and (self.missing_left <= 1).all()),
                "Record: a negative column or bin, or a missing flag other than 0/1")


@message(0x0D07)
@dataclass(frozen=True)
class Assigned(Message):
    """The record id of each split of the :class:`Record` (same order), and per row 1 = goes left (0 elsewhere)."""

    tree: int
    depth: int
    records: np.ndarray
    left: np.ndarray

    def __post_init__(self) -> None:
        _step("Assigned", self.tree, self.depth)
        require_array("Assigned.records", self.records, dtype="int32", ndim=1)
        require(0 < len(self.records) <= 2**self.depth and int(self.records.min()) >= 0, "Assigned: bad records")
        _rows("Assigned", "left", self.left, "uint8")
        require(int(self.left.max()) <= 1, "Assigned.left: a flag other than 0/1")


@message(0x0D08)
@dataclass(frozen=True)
class Finish(Message):
    """Training is over after ``trees`` trees; the partner keeps its records."""

    trees: int

    def __post_init__(self) -> None:
        require(0 < self.trees <= MAX_TREES, f"Finish.trees out of range: {self.trees}")


@message(0x0D09)
@dataclass(frozen=True)
class Ask(Message):
    """Prediction: evaluate every recorded split from record ``first`` on, on the ``rows`` aligned rows (early
    stopping asks after each tree for the records that tree added only; prediction asks from 0)."""

    rows: int
    first: int = 0

    def __post_init__(self) -> None:
        require(0 < self.rows <= MAX_ROWS, f"Ask.rows out of range: {self.rows}")
        require(0 <= self.first <= MAX_TREES * 2**MAX_DEPTH, f"Ask.first out of range: {self.first}")


@message(0x0D0A)
@dataclass(frozen=True)
class Decisions(Message):
    """One bit per (row, record), from the record the :class:`Ask` named: 1 = the row goes left at that split."""

    bits: np.ndarray

    def __post_init__(self) -> None:
        require_array("Decisions.bits", self.bits, dtype="uint8", ndim=2)
        require(0 < len(self.bits) <= MAX_ROWS and (self.bits.size == 0 or int(self.bits.max()) <= 1),
                "Decisions.bits: rows out of range or a bit other than 0/1")


@message(0x0D0B)
@dataclass(frozen=True)
class Order(Message):
    """Renumber these categorical columns' codes before the first split (``BoostParams.order_categories``): row
    ``k`` of ``ranks`` is column ``columns[k]``'s new code of each code, a permutation that keeps the missing code
    last. Sent once, after the first tree's root histograms; every later code, split and record uses the new codes.
    What it tells the partner: its categories' order by the label party's smoothed label rate."""

    columns: np.ndarray
    ranks: np.ndarray

    def __post_init__(self) -> None:
        require_array("Order.columns", self.columns, dtype="int32", ndim=1)
        require_array("Order.ranks", self.ranks, dtype="int32", ndim=2)
        count, width = self.ranks.shape
        require(0 < count == len(self.columns) and len(np.unique(self.columns)) == count
                and int(self.columns.min()) >= 0, "Order: columns and ranks disagree, or a column twice")
        require(3 <= width <= 256 and bool((np.sort(self.ranks, axis=1) == np.arange(width)).all())
                and bool((self.ranks[:, -1] == width - 1).all()),
                "Order.ranks: a row that is not a permutation keeping the missing code last")

