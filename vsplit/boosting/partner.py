"""The partner's machine: encrypted histograms of its own columns, and the splits it records.

Theory of operation: the partner holds its rows' bin codes (:mod:`vsplit.boosting.bins`), never a label. It reads
the label party's key, refusing a scheme or size it does not accept, then per tree the ciphertexts of every row's
gradient and hessian (with GOSS, of the sampled rows only). Per level it sums them per (node, column, code), but only
what the label party cannot compute itself: of two siblings the one with fewer rows (the label party derives the
other as ``parent - sibling`` in plaintext, from the parent it decrypted a level up), of those nodes only the
non-empty cells, and of each column not the cell of most rows (the node's total minus the others). It packs the sums
(:func:`vsplit.he.pack_sums`) and sends them with each cell's state. Asked to record a split, it
keeps column, threshold code and missing direction under a record id, and answers with the record ids and each row's
left flag: the label party learns which rows go left, never the threshold's value. What the partner learns: each
node's rows (from :class:`~vsplit.boosting.messages.Level`), which of its own splits won, and with GOSS which rows
were sampled in each tree (the rows of largest gradient among them).

Example:
    >>> import numpy as np
    >>> model = PartnerModel(columns=np.array([0]), bins=np.array([1]), missing_left=np.array([1], np.uint8),
    ...                      width=4)
    >>> model.decisions(np.array([[0], [2], [3]])).ravel().tolist()
    [1, 0, 1]
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.boosting.backend import Backend, SerialBackend
from vsplit.boosting.bins import full_ranks, rank_codes
from vsplit.boosting.gains import BOUNDS, goes_left, summed_directly
from vsplit.boosting.messages import (
    VERSION,
    Assigned,
    BoostHello,
    BoostReady,
    Finish,
    Gradients,
    Histograms,
    Level,
    Order,
    Record,
)
from vsplit.errors import ProtocolError
from vsplit.he import (
    MIN_KEY_BITS,
    Ciphertexts,
    Packing,
    PublicKey,
    decode_ciphertexts,
)
from vsplit.protocol.answering import AnswersLabel
from vsplit.protocol.machine import Outgoing


@dataclass(frozen=True)
class PartnerModel:
    """What a partner keeps of a trained model: its recorded splits, by record id (never sent to the label party)."""

    columns: np.ndarray
    bins: np.ndarray
    missing_left: np.ndarray
    width: int

    def decisions(self, codes: np.ndarray) -> np.ndarray:
        """uint8 ``(rows, records)``: 1 where a row goes left at a recorded split (codes from the same bins)."""
        out = np.empty((len(codes), len(self.columns)), dtype=np.uint8)
        for r, (column, bin_, left) in enumerate(zip(self.columns, self.bins, self.missing_left, strict=True)):
            out[:, r] = goes_left(codes[:, column], bin=int(bin_), missing_left=bool(left), width=self.width)
        return out


class PartnerBoost(AnswersLabel):
    """A partner's side of training: ``codes`` of its aligned rows, ``width`` codes per column.

    Args:
        codes: int ``(rows, columns)`` in ``0..width-1`` (``width - 1``: missing).
        width: codes per column (``Bins.width``).
        label: the label party's name.
        schemes, min_key_bits, insecure_small_key_for_tests: which keys it accepts (see
            :meth:`vsplit.he.PublicKey.from_bytes`).
        min_node_rows: refuse to sum a node of fewer rows (a node of one row tells its gradient).
        backend: where the sums are made and packed (:mod:`vsplit.boosting.backend`; default: this process).
        categorical: its categorical columns: named to the label party only if it asks (``BoostHello.order``),
            which then renumbers their codes once (:class:`~vsplit.boosting.messages.Order`).
    """

    protocol = "boosting partner"

    def __init__(self, codes: np.ndarray, *, width: int, label: str = "bank", schemes: tuple[str, ...] = ("ou",),
                 min_key_bits: int = MIN_KEY_BITS, insecure_small_key_for_tests: bool = False,
                 min_node_rows: int = 1, backend: Backend | None = None, categorical: tuple[int, ...] = ()) -> None:
        self.backend: Backend = backend or SerialBackend()
        self.codes = np.asarray(codes, dtype=np.int64)
        if self.codes.ndim != 2 or not self.codes.size or self.codes.min() < 0 or self.codes.max() >= width:
            raise ProtocolError(f"boosting partner: codes must be (rows, columns) in 0..{width - 1}", local=True)
        self.width, self.label, self.min_node_rows = width, label, min_node_rows
        self.categorical = tuple(int(c) for c in categorical)
        if any(not 0 <= c < self.codes.shape[1] for c in self.categorical):
            raise ProtocolError(f"boosting partner: categorical columns {self.categorical} out of range", local=True)
        #: its codes' renumbering once the label party ordered its categories (``(columns, width)``); ``None``: not
        self.ranks: np.ndarray | None = None
        self._ordering = False
        self._accept = {"schemes": schemes, "min_key_bits": min_key_bits,
                        "insecure_small_key_for_tests": insecure_small_key_for_tests}
        self._expect: tuple[type, ...] = (BoostHello,)
        self._public: PublicKey | None = None
        self._packing: Packing | None = None
        self._column: Ciphertexts | None = None
        self._frame = b""
        self._tree, self._depth = -1, -1
        self._nodes = np.empty(0, dtype=np.int64)
        self._ids = np.empty(0, dtype=np.int64)
        self._sampled = np.ones(len(self.codes), dtype=bool)  # the rows that carry a gradient this tree
        self._cipher = np.arange(len(self.codes))  # each row's ciphertext, -1: none
        self._records: list[tuple[int, int, int]] = []
        #: seconds of this party's work so far: ``histograms`` (the level's ciphertext sums, packed and encoded)
        self.seconds: Counter[str] = Counter()
        self.done = False
        self.result: PartnerModel | None = None

    @property
    def records(self) -> np.ndarray:
        """The splits this party recorded so far, by record id: ``(records, 3)`` column, threshold bin, missing left."""
        return np.array(self._records, dtype=np.int64).reshape(-1, 3)

    @property
    def trees_done(self) -> int:
        """Trees finished: those before the one whose gradients it holds (all of them, once done)."""
        return self._tree + 1 if self.done else max(self._tree, 0)

    def restore(self, *, trees: int, records: np.ndarray, ranks: np.ndarray | None = None) -> None:
        """Go on after ``trees`` finished trees and the ``records`` they made (a checkpoint's), before :meth:`start`;
        ``ranks``: the renumbering of its codes the first tree made, if it ordered its categories."""
        self._tree = int(trees) - 1
        self._records = [(int(c), int(b), int(m)) for c, b, m in np.asarray(records, dtype=np.int64).reshape(-1, 3)]
        if ranks is not None:
            self.ranks = np.asarray(ranks, dtype=np.int32)
            self.codes = rank_codes(self.codes, self.ranks)

    def _handlers(self) -> dict[type, Any]:
        return {BoostHello: self._hello, Gradients: self._gradients, Level: self._level, Record: self._record,
                Finish: self._finish, Order: self._order}

    def _hello(self, msg: BoostHello) -> list[Outgoing]:
        if msg.version != VERSION:
            raise ProtocolError(f"boosting: the label party speaks version {msg.version}, this party {VERSION}")
        if msg.rows != len(self.codes):
            raise ProtocolError(f"boosting: the label party has {msg.rows} aligned rows, this party "
                                f"{len(self.codes)}; align both on the same rows first")
        self._public = PublicKey.from_bytes(msg.key.tobytes(), **self._accept)
        planned = Packing.plan(scale=msg.scale, bounds=BOUNDS, max_rows=msg.rows,
                               plaintext_bits=self._public.plaintext_bits)
        wide = planned.slots * msg.slot_bits > planned.plaintext_bits
        if wide or not planned.slot_bits <= msg.slot_bits <= planned.slot_bits + 8:
            raise ProtocolError(f"boosting: {msg.slot_bits}-bit slots announced, {planned.slot_bits} planned "
                                "(up to 8 more bits for GOSS weights)")
        self._packing = dataclasses.replace(planned, slot_bits=msg.slot_bits)
        self._expect = (Gradients, Finish)
        self._ordering = bool(msg.order) and self._tree < 0 and bool(self.categorical)  # a resumed run is ordered
        flags = np.isin(np.arange(self.codes.shape[1] if msg.order else 0), self.categorical).astype(np.uint8)
        return [Outgoing(self.label, BoostReady(columns=self.codes.shape[1], width=self.width, categorical=flags))]

    def _gradients(self, msg: Gradients) -> list[Outgoing]:
        if msg.tree != self._tree + 1:
            raise ProtocolError(f"boosting: gradients of tree {msg.tree}, expected tree {self._tree + 1}")
        if len(msg.sample) not in (0, len(self.codes)):
            raise ProtocolError(f"boosting: a sample of {len(msg.sample)} rows, this party has {len(self.codes)}")
        assert self._public is not None
        sampled = msg.sample.astype(bool) if len(msg.sample) else np.ones(len(self.codes), dtype=bool)
        count = int(sampled.sum())
        self._frame = msg.frame.tobytes()
        self._column = decode_ciphertexts(self._frame, public=self._public, expected_count=count)
        self._sampled = sampled
        self._cipher = np.where(sampled, np.cumsum(sampled) - 1, -1)  # each row's ciphertext, -1: none
        self._tree, self._depth = msg.tree, -1
        self._expect = (Level,)
        return []

    def _level(self, msg: Level) -> list[Outgoing]:
        if msg.tree != self._tree or msg.depth != self._depth + 1 or len(msg.nodes) != len(self.codes):
            raise ProtocolError(f"boosting: level {msg.tree}/{msg.depth} of {len(msg.nodes)} rows out of step")
        nodes = msg.nodes.astype(np.int64)
        ids, counts = np.unique(nodes[nodes >= 0], return_counts=True)
        if counts.min() < self.min_node_rows:
            raise ProtocolError(f"boosting: a node of {int(counts.min())} rows, under min_node_rows = "
                                f"{self.min_node_rows}")
        if msg.depth and not np.isin((ids - 1) // 2, self._ids).all():
            raise ProtocolError("boosting: a node whose parent was not at the last level")
        began = time.perf_counter()
        packed, cells = self._level_sums(nodes, ids, counts)
        self.seconds["histograms"] += time.perf_counter() - began
        self._nodes, self._ids, self._depth = nodes, ids, msg.depth
        self._expect = (Record, Level, Gradients, Finish)
        if self._ordering and msg.tree == 0 and msg.depth == 0:
            self._expect = (Order,)  # the first tree's root: the order comes before anything else
        frame = np.frombuffer(packed, dtype=np.uint8)
        return [Outgoing(self.label, Histograms(tree=self._tree, depth=msg.depth, frame=frame, cells=cells))]

    def _level_sums(self, nodes: np.ndarray, ids: np.ndarray, counts: np.ndarray) -> tuple[bytes, np.ndarray]:
        """The packed sums (a ciphertext message) of the cells the label party cannot derive, and each cell's state
        (see ``Histograms.cells``).

        Only the nodes :func:`summed_directly` names are summed (their siblings the label party derives); of those,
        only the non-empty (node, column, code) cells, and of each column the cell of most rows not at all (the
        label party has the node's total). So the sums cost about ``rows x columns`` additions over the smaller
        halves only, and the label party decrypts what it cannot compute.
        """
        assert self._column is not None and self._packing is not None
        cols, width = self.codes.shape[1], self.width
        per = cols * width
        sampled_nodes = np.where(self._sampled, nodes, -1)
        sizes = np.bincount(np.searchsorted(ids, sampled_nodes[sampled_nodes >= 0]), minlength=len(ids))
        direct = ids[summed_directly(ids, sizes)]
        slot = np.full(int(ids.max()) + 1, -1)
        slot[direct] = np.arange(len(direct))
        row_slot = np.where(sampled_nodes >= 0, slot[np.maximum(sampled_nodes, 0)], -1)
        rows = np.nonzero(row_slot >= 0)[0]
        keys = ((row_slot[rows, None] * cols + np.arange(cols)) * width + self.codes[rows]).ravel()
        n_cells = len(direct) * per
        filled = np.bincount(keys, minlength=n_cells)
        cells = (filled > 0).astype(np.uint8)
        by_column = filled.reshape(-1, width)
        largest = np.argmax(by_column, axis=1) + np.arange(len(by_column)) * width
        cells[largest[by_column.max(axis=1) > 0]] = 2
        if not (cells == 1).any():  # a message carries at least one ciphertext
            cells[np.argmax(cells == 2)] = 1
        keep = cells[keys] == 1
        keys, row_of = keys[keep], np.repeat(self._cipher[rows], cols)[keep]
        order = np.argsort(keys, kind="stable")
        sent = np.nonzero(cells == 1)[0]
        bounds = np.searchsorted(keys[order], np.concatenate([sent, [n_cells]]))
        row_of = row_of[order]
        groups = [row_of[bounds[g] : bounds[g + 1]].tolist() for g in range(len(sent))]  # a loop over cells
        return self.backend.sums(self._column, self._frame, groups, packing=self._packing), cells

    def _order(self, msg: Order) -> list[Outgoing]:
        if msg.ranks.shape[1] != self.width or not set(msg.columns.tolist()) <= set(self.categorical):
            raise ProtocolError("boosting: an order of a column that is not one of this party's categorical ones, or "
                                "of another number of codes")
        self.ranks = full_ranks(self.codes.shape[1], self.width, dict(zip(msg.columns.tolist(), msg.ranks,
                                                                          strict=True)))
        self.codes = rank_codes(self.codes, self.ranks)
        self._ordering = False
        self._expect = (Record, Level, Gradients, Finish)
        return []

    def _record(self, msg: Record) -> list[Outgoing]:
        if msg.tree != self._tree or msg.depth != self._depth:
            raise ProtocolError(f"boosting: record for {msg.tree}/{msg.depth}, the level is {self._tree}/{self._depth}")
        if not np.isin(msg.nodes, self._ids).all():
            raise ProtocolError("boosting: record of a node not at this level")
        if int(msg.columns.max()) >= self.codes.shape[1] or int(msg.bins.max()) >= self.width - 1:
            raise ProtocolError("boosting: record of a column or bin this party does not have")
        left = np.zeros(len(self.codes), dtype=np.uint8)
        records = []
        for node, column, bin_, missing in zip(msg.nodes, msg.columns, msg.bins, msg.missing_left, strict=True):
            here = self._nodes == node  # a loop over the level's recorded nodes, not rows
            left[here] = goes_left(self.codes[here, column], bin=int(bin_), missing_left=bool(missing),
                                   width=self.width)
            records.append(len(self._records))
            self._records.append((int(column), int(bin_), int(missing)))
        self._expect = (Level, Gradients, Finish)
        return [Outgoing(self.label, Assigned(tree=self._tree, depth=self._depth,
                                              records=np.array(records, dtype=np.int32), left=left))]

    def _finish(self, msg: Finish) -> list[Outgoing]:
        if msg.trees != self._tree + 1:
            raise ProtocolError(f"boosting: finish after {msg.trees} trees, this party saw {self._tree + 1}")
        kept = np.array(self._records, dtype=np.int64).reshape(-1, 3)
        self.result = PartnerModel(columns=kept[:, 0], bins=kept[:, 1], missing_left=kept[:, 2].astype(np.uint8),
                                   width=self.width)
        self.done = True
        self._column = None
        return []
