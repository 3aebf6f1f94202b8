"""The partner's machine: encrypted histograms of its own columns, and the splits it records.

Theory of operation: the partner holds its rows' bin codes (:mod:`vsplit.boosting.bins`), never a label. It reads
the label party's key, refusing a scheme or size it does not accept, then per tree the ciphertexts of every row's
gradient and hessian. Per level it sums them per (node, column, code): a root directly; of two siblings only the one
with fewer rows, the other as ``parent - sibling`` (histogram subtraction, :func:`vsplit.he.subtract`'s idea done on
the whole level at once). It packs the sums (:func:`vsplit.he.pack_sums`) and sends them. Asked to record a split, it
keeps column, threshold code and missing direction under a record id, and answers with the record ids and each row's
left flag: the label party learns which rows go left, never the threshold's value. What the partner learns: each
node's rows (from :class:`~vsplit.boosting.messages.Level`) and which of its own splits won.

Example:
    >>> import numpy as np
    >>> model = PartnerModel(columns=np.array([0]), bins=np.array([1]), missing_left=np.array([1], np.uint8),
    ...                      width=4)
    >>> model.decisions(np.array([[0], [2], [3]])).ravel().tolist()
    [1, 0, 1]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.boosting.gains import BOUNDS, goes_left
from vsplit.boosting.messages import (
    VERSION,
    Assigned,
    BoostHello,
    BoostReady,
    Finish,
    Gradients,
    Histograms,
    Level,
    Record,
)
from vsplit.errors import ProtocolError
from vsplit.he import (
    MIN_KEY_BITS,
    Ciphertexts,
    Packing,
    PublicKey,
    decode_ciphertexts,
    encode_ciphertexts,
    heu_bytes,
    pack_sums,
)
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message


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


class PartnerBoost:
    """A partner's side of training: ``codes`` of its aligned rows, ``width`` codes per column.

    Args:
        codes: int ``(rows, columns)`` in ``0..width-1`` (``width - 1``: missing).
        width: codes per column (``Bins.width``).
        label: the label party's name.
        schemes, min_key_bits, insecure_small_key_for_tests: which keys it accepts (see
            :meth:`vsplit.he.PublicKey.from_bytes`).
        min_node_rows: refuse to sum a node of fewer rows (a node of one row tells its gradient).
    """

    def __init__(self, codes: np.ndarray, *, width: int, label: str = "bank", schemes: tuple[str, ...] = ("ou",),
                 min_key_bits: int = MIN_KEY_BITS, insecure_small_key_for_tests: bool = False,
                 min_node_rows: int = 1) -> None:
        self.codes = np.asarray(codes, dtype=np.int64)
        if self.codes.ndim != 2 or not self.codes.size or self.codes.min() < 0 or self.codes.max() >= width:
            raise ProtocolError(f"boosting partner: codes must be (rows, columns) in 0..{width - 1}", local=True)
        self.width, self.label, self.min_node_rows = width, label, min_node_rows
        self._accept = {"schemes": schemes, "min_key_bits": min_key_bits,
                        "insecure_small_key_for_tests": insecure_small_key_for_tests}
        self._expect: tuple[type, ...] = (BoostHello,)
        self._public: PublicKey | None = None
        self._packing: Packing | None = None
        self._column: Ciphertexts | None = None
        self._tree, self._depth = -1, -1
        self._nodes = np.empty(0, dtype=np.int64)
        self._ids = np.empty(0, dtype=np.int64)
        self._hist: Any = None  # this level's unpacked sums (sf-heu array), in (node, column, code) order
        self._records: list[tuple[int, int, int]] = []
        self.done = False
        self.result: PartnerModel | None = None

    def expects(self, peer: str) -> bool:
        """The partner waits for the label party until :class:`Finish`."""
        return peer == self.label and not self.done

    def start(self) -> list[Outgoing]:
        """The label party speaks first."""
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take one message from the label party; answer it."""
        if sender != self.label or not isinstance(msg, self._expect):
            raise ProtocolError(f"boosting partner: unexpected {type(msg).__name__} from {sender!r}")
        handler = {BoostHello: self._hello, Gradients: self._gradients, Level: self._level, Record: self._record,
                   Finish: self._finish}[type(msg)]
        return handler(msg)

    def _hello(self, msg: BoostHello) -> list[Outgoing]:
        if msg.version != VERSION:
            raise ProtocolError(f"boosting: the label party speaks version {msg.version}, this party {VERSION}")
        if msg.rows != len(self.codes):
            raise ProtocolError(f"boosting: the label party has {msg.rows} aligned rows, this party "
                                f"{len(self.codes)}; align both on the same rows first")
        self._public = PublicKey.from_bytes(msg.key.tobytes(), **self._accept)
        self._packing = Packing.plan(scale=msg.scale, bounds=BOUNDS, max_rows=msg.rows,
                                     plaintext_bits=self._public.plaintext_bits)
        if self._packing.slot_bits != msg.slot_bits:
            raise ProtocolError(f"boosting: {msg.slot_bits}-bit slots announced, {self._packing.slot_bits} planned")
        self._expect = (Gradients, Finish)
        return [Outgoing(self.label, BoostReady(columns=self.codes.shape[1], width=self.width))]

    def _gradients(self, msg: Gradients) -> list[Outgoing]:
        if msg.tree != self._tree + 1:
            raise ProtocolError(f"boosting: gradients of tree {msg.tree}, expected tree {self._tree + 1}")
        assert self._public is not None
        self._column = decode_ciphertexts(msg.frame.tobytes(), public=self._public, expected_count=len(self.codes))
        self._tree, self._depth, self._hist = msg.tree, -1, None
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
        self._hist = self._level_sums(nodes, ids, counts)
        self._nodes, self._ids, self._depth = nodes, ids, msg.depth
        self._expect = (Record, Level, Gradients, Finish)
        assert self._packing is not None and self._public is not None
        packed = pack_sums(Ciphertexts(public=self._public, array=self._hist), packing=self._packing)
        frame = np.frombuffer(encode_ciphertexts(packed), dtype=np.uint8)
        return [Outgoing(self.label, Histograms(tree=self._tree, depth=msg.depth, frame=frame))]

    def _level_sums(self, nodes: np.ndarray, ids: np.ndarray, counts: np.ndarray) -> Any:
        """Sums per (node, column, code) of the nodes ``ids``: the smaller sibling directly, the other subtracted."""
        assert self._column is not None and self._public is not None
        cols, width = self.codes.shape[1], self.width
        per = cols * width
        size = dict(zip(ids.tolist(), counts.tolist(), strict=True))
        derived = [i for i in ids.tolist() if self._hist is not None and _sibling(i) in size
                   and (size[i], i % 2 == 1) > (size[_sibling(i)], _sibling(i) % 2 == 1)]
        direct = np.setdiff1d(ids, derived)
        slot = np.full(int(ids.max()) + 1, -1)
        slot[direct] = np.arange(len(direct))
        inside = nodes >= 0
        row_slot = np.full(len(nodes), -1)
        row_slot[inside] = slot[nodes[inside]]
        rows = np.nonzero(row_slot >= 0)[0]
        keys = ((row_slot[rows, None] * cols + np.arange(cols)) * width + self.codes[rows]).ravel()
        order = np.argsort(keys, kind="stable")
        row_of = np.repeat(rows, cols)[order]
        bounds = np.searchsorted(keys[order], np.arange(len(direct) * per + 1))
        groups = [row_of[bounds[g] : bounds[g + 1]].tolist() for g in range(len(direct) * per)]  # per group
        evaluator = self._public.kit.evaluator()
        parts = [evaluator.batch_select_sum(self._column.array, groups)]
        order_ids = direct.tolist()
        if derived:
            within = np.arange(per)
            parents = np.searchsorted(self._ids, (np.array(derived) - 1) // 2)
            siblings = slot[[_sibling(i) for i in derived]]
            from_parent = (parents[:, None] * per + within).ravel().tolist()
            from_sibling = (siblings[:, None] * per + within).ravel().tolist()
            parts.append(evaluator.sub(self._hist[from_parent], parts[0][from_sibling]))
            order_ids += derived
        if len(parts) == 1:
            return parts[0]
        matrix = np.concatenate([heu_bytes.ciphertexts_to_matrix(p.serialize(), width=self._public.width)
                                 for p in parts])
        position = np.argsort(order_ids)  # back to increasing node ids
        matrix = matrix.reshape(len(order_ids), per, -1)[position].reshape(len(order_ids) * per, -1)
        from vsplit.he._lib import heu_modules

        _, hnp = heu_modules()
        return hnp.CiphertextArray.load_from(heu_bytes.matrix_to_ciphertexts(matrix, scheme=self._public.scheme))

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
        self._column = self._hist = None
        return []


def _sibling(node: int) -> int:
    return node + 1 if node % 2 == 1 else node - 1
