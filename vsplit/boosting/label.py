"""The label party's machine: gradients encrypted once per tree, splits chosen over every party's histograms.

Theory of operation: per tree the label party computes each row's gradient and hessian from the current margins,
quantizes them (:func:`vsplit.boosting.gains.quantize`) and sends them encrypted, one ciphertext a row (with GOSS,
:func:`vsplit.boosting.gains.goss_weights`, only the sampled rows', weighted). Per level it sends each row's node
(:class:`~vsplit.boosting.messages.Level`), sums its own columns in plaintext, decrypts every partner's packed sums
and completes them in plaintext (a larger sibling is its parent minus the smaller one, a column's remaining cell the
node's total minus the others: :class:`~vsplit.boosting.messages.Histograms`), and ranks all candidates at once
(:func:`vsplit.boosting.gains.best_splits`: label party
first, then partners in the order given). Its own winning splits it applies itself; a partner's it asks that partner
to record (:class:`~vsplit.boosting.messages.Record`) and gets back the record ids and each row's left flag. When the
trees reach ``max_depth`` or no node gains, it computes the leaves from its own sums. What it learns of a partner:
per node, column and code the sums of its own gradients (so each bin's share of a node), which rows go left at a
partner's split, and the position (column, code) of the winning split in the partner's binning; never a value or an
edge.

The run's key pair is made here (2048-bit OU by default) unless one is passed; the secret key stays in this process.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from vsplit.boosting.backend import Backend, SerialBackend
from vsplit.boosting.bins import full_ranks, rank_codes
from vsplit.boosting.gains import (
    BOUNDS,
    BoostParams,
    base_margin,
    best_splits,
    category_ranks,
    goes_left,
    goss_bound,
    histograms,
    quantize,
    reorder,
    root_row_hessian,
    summed_directly,
    weighted_gradients,
)
from vsplit.boosting.messages import (
    CIPHER_HEADER_BYTES,
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
from vsplit.boosting.pooled import grow_level, leaf_sums, leaves_of, node_totals
from vsplit.boosting.trees import BoostModel, Split, Tree
from vsplit.errors import ProtocolError
from vsplit.he import (
    KeyPair,
    Packing,
    decode_ciphertexts,
    decrypt_sums,
    generate_keypair,
)
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message


class LabelBoost:
    """The label party's side of training.

    Args:
        codes: its own bin codes, int ``(rows, columns)`` in ``0..width-1``.
        width: its codes per column.
        labels: 0/1 per aligned row.
        partners: the partners' names; their splits rank in this order after the label party's.
        params: the boosting settings.
        keys: this run's key pair; made here (``scheme``, ``key_bits``) when not given.
        backend: where the gradients are encrypted (:mod:`vsplit.boosting.backend`; default: this process).
        categorical: its own categorical columns, ordered at the first tree's root with
            ``params.order_categories`` (as every partner's, which each names in its ``BoostReady``).
    """

    def __init__(self, codes: np.ndarray, *, width: int, labels: np.ndarray, partners: Sequence[str],
                 params: BoostParams, keys: KeyPair | None = None, scheme: str = "ou", key_bits: int = 2048,
                 insecure_small_key_for_tests: bool = False, backend: Backend | None = None,
                 categorical: Sequence[int] = ()) -> None:
        self.backend: Backend = backend or SerialBackend()
        self.codes = np.asarray(codes, dtype=np.int64)
        self.labels = np.asarray(labels, dtype=np.float64)
        if self.codes.ndim != 2 or len(self.codes) != len(self.labels) or not len(self.labels):
            raise ProtocolError("boosting: codes and labels must cover the same aligned rows", local=True)
        self.width, self.partners, self.params = width, list(partners), params
        self.keys = keys or generate_keypair(scheme=scheme, key_bits=key_bits,
                                             insecure_small_key_for_tests=insecure_small_key_for_tests)
        bound = goss_bound(params)  # GOSS weights scale the values each slot sums
        self.packing = Packing.plan(scale=params.scale, bounds=tuple(b * bound for b in BOUNDS),
                                    max_rows=len(self.labels), plaintext_bits=self.keys.public.plaintext_bits)
        self.base = base_margin(self.labels)
        self.margin = np.full(len(self.labels), self.base)
        self.shapes: dict[str, tuple[int, int]] = {}
        self.categorical = tuple(int(c) for c in categorical)
        self._partner_categorical: dict[str, tuple[int, ...]] = {}
        #: its own codes' renumbering once the first tree's root ordered the categories (``(columns, width)``);
        #: ``None`` before, or without ``params.order_categories``
        self.ranks: np.ndarray | None = None
        self.trees: list[Tree] = []
        #: seconds of this party's work so far: ``encryption`` (the gradients, packed, encrypted and encoded),
        #: ``decryption`` (a partner's sums read, decrypted and completed), ``histograms`` (its own plaintext sums
        #: and the choice of splits)
        self.seconds: Counter[str] = Counter()
        self._waiting: set[str] = set()
        self._phase = "hello"
        self.done = False
        self.result: BoostModel | None = None

    def restore(self, *, trees: Sequence[Tree], margin: np.ndarray, ranks: np.ndarray | None = None) -> None:
        """Go on after the finished ``trees`` and the ``margin`` they left (a checkpoint's), before :meth:`start`;
        ``ranks``: the renumbering of its own codes the first tree made, if it ordered the categories."""
        self.trees = list(trees)
        self.margin = np.asarray(margin, dtype=np.float64)
        if ranks is not None:
            self.ranks = np.asarray(ranks, dtype=np.int32)
            self.codes = rank_codes(self.codes, self.ranks)

    def expects(self, peer: str) -> bool:
        """Whether an answer from ``peer`` is still awaited."""
        return peer in self._waiting

    def start(self) -> list[Outgoing]:
        """Send the public key and fixed point to every partner."""
        key = np.frombuffer(self.keys.public.to_bytes(), dtype=np.uint8)
        hello = BoostHello(version=VERSION, rows=len(self.labels), scale=self.params.scale,
                           slot_bits=self.packing.slot_bits, key=key, order=int(self.params.order_categories))
        self._waiting = set(self.partners)
        return [Outgoing(p, hello) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take a partner's answer; when all are in, go on."""
        wanted = {"hello": BoostReady, "histograms": Histograms, "assigned": Assigned}[self._phase]
        if sender not in self._waiting or not isinstance(msg, wanted):
            raise ProtocolError(f"boosting: unexpected {type(msg).__name__} from {sender!r}")
        if isinstance(msg, BoostReady):
            if self.params.order_categories and len(msg.categorical) != msg.columns:
                raise ProtocolError(f"boosting: {sender!r} did not say which of its columns are categorical")
            self.shapes[sender] = (msg.columns, msg.width)
            self._partner_categorical[sender] = tuple(np.flatnonzero(msg.categorical).tolist())
        elif isinstance(msg, Histograms):
            began = time.perf_counter()
            self._partner_hist[sender] = self._read(sender, msg)
            self.seconds["decryption"] += time.perf_counter() - began
        else:
            self._assigned(sender, msg)
        self._waiting.discard(sender)  # only once the message was read: a refused one leaves the state as it was
        if self._waiting:
            return []
        return {"hello": self._start_tree, "histograms": self._choose, "assigned": self._next_level}[self._phase]()

    def _start_tree(self) -> list[Outgoing]:
        values, weights = weighted_gradients(self.margin, self.labels, self.params, tree=len(self.trees))
        self.gh = quantize(values[:, 0], values[:, 1], scale=self.params.scale)
        self.sampled = weights > 0
        began = time.perf_counter()
        frame = np.frombuffer(self.backend.encrypt(self.keys.public, values[self.sampled], packing=self.packing),
                              dtype=np.uint8)
        self.seconds["encryption"] += time.perf_counter() - began
        sample = self.sampled.astype(np.uint8) if not self.sampled.all() else np.zeros(0, np.uint8)
        self.tree_nodes = np.zeros(len(self.labels), dtype=np.int64)
        self.nodes, self.splits, self.depth = self.tree_nodes.copy(), {}, 0
        self._last_hist: dict[str, np.ndarray] = {}
        out = [Outgoing(p, Gradients(tree=len(self.trees), frame=frame, sample=sample)) for p in self.partners]
        return out + self._level()

    def _level(self) -> list[Outgoing]:
        self.ids = np.unique(self.nodes[self.nodes >= 0])
        if self.depth >= self.params.max_depth or not len(self.ids):
            return self._finish_tree()
        self._partner_hist: dict[str, np.ndarray] = {}
        inside = self.sampled & (self.nodes >= 0)
        sizes = np.bincount(np.searchsorted(self.ids, self.nodes[inside]), minlength=len(self.ids))
        self._direct = summed_directly(self.ids, sizes)
        self._totals = node_totals(self.gh, self._slots(), n_nodes=len(self.ids))
        self._phase, self._waiting = "histograms", set(self.partners)
        level = Level(tree=len(self.trees), depth=self.depth, nodes=self.nodes.astype(np.int32))
        return [Outgoing(p, level) for p in self.partners]

    def _read(self, sender: str, msg: Histograms) -> np.ndarray:
        if msg.tree != len(self.trees) or msg.depth != self.depth:
            raise ProtocolError(f"boosting: histograms of {msg.tree}/{msg.depth} out of step")
        cols, width = self.shapes[sender]
        direct = self.ids[self._direct]
        cells = msg.cells if len(msg.cells) else np.ones(len(direct) * cols * width, dtype=np.uint8)  # all sent
        if len(cells) != len(direct) * cols * width:
            raise ProtocolError(f"boosting: {sender!r} sent {len(cells)} cell states for {len(direct)} nodes of "
                                f"{cols} columns of {width} codes")
        count = int((cells == 1).sum())
        per = self.packing.sums_per_plaintext if count > 1 and self.packing.sums_per_plaintext > 1 else 1
        expected = -(-count // per)  # capped at the bytes that many take, then counted
        sums = decode_ciphertexts(msg.frame.tobytes(), public=self.keys.public,
                                  max_bytes=CIPHER_HEADER_BYTES + expected * self.keys.public.width)
        if len(sums) != expected:
            raise ProtocolError(f"ciphertext message: {len(sums)} ciphertexts, the protocol expects {expected}")
        ints = decrypt_sums(self.keys, sums, packing=self.packing, count=count, sums_per_plaintext=per)
        summed = np.zeros((len(cells), 2), dtype=np.int64)
        summed[cells == 1] = ints
        summed = summed.reshape(len(direct), cols, width, 2)
        rest = (cells == 2).reshape(len(direct), cols, width)
        if (rest.sum(axis=2) > 1).any():
            raise ProtocolError(f"boosting: {sender!r} left more than one cell of a column to derive")
        missing = self._totals[self._direct][:, None, :] - summed.sum(axis=2)  # (nodes, cols, 2)
        summed += rest[..., None] * missing[:, :, None, :]
        hist = np.empty((len(self.ids), cols, width, 2), dtype=np.int64)
        hist[self._direct] = summed
        if not self._direct.all():  # a derived node: its parent's sums (last level) minus its sibling's
            derived = self.ids[~self._direct]
            siblings = np.where(derived % 2 == 1, derived + 1, derived - 1)
            parents = np.searchsorted(self._last_ids, (derived - 1) // 2)
            hist[~self._direct] = self._last_hist[sender][parents] - hist[np.searchsorted(self.ids, siblings)]
        return hist

    def _slots(self) -> np.ndarray:
        slots = np.full(len(self.nodes), -1)
        inside = self.nodes >= 0
        slots[inside] = np.searchsorted(self.ids, self.nodes[inside])
        return slots

    def _choose(self) -> list[Outgoing]:
        began = time.perf_counter()
        slots = self._slots()
        own = histograms(self.codes, self.gh, slots, n_nodes=len(self.ids), width=self.width)
        ordering: list[Outgoing] = []
        if self.params.order_categories and not self.trees and not self.depth:
            own, ordering = self._order(own)
        hists = [own] + [self._partner_hist[p] for p in self.partners]
        totals = self._totals
        self._last_hist, self._last_ids = self._partner_hist, self.ids
        self.chosen: dict[int, np.ndarray] = {}
        asks: dict[int, list[tuple[int, int, int, bool]]] = {}
        for node, choice in zip(self.ids.tolist(), best_splits(hists, totals, self.params), strict=True):
            if choice is None:
                continue
            if choice.party == 0:
                self.splits[node] = Split(party=0, column=choice.column, bin=choice.bin,
                                          missing_left=choice.missing_left)
                self.chosen[node] = goes_left(self.codes[:, choice.column], bin=choice.bin,
                                              missing_left=choice.missing_left, width=self.width)
            else:
                asks.setdefault(choice.party, []).append((node, choice.column, choice.bin, choice.missing_left))
        self._asked = asks
        out = ordering
        for party, wins in asks.items():
            nodes, columns, bins, missing = (np.array(v) for v in zip(*wins, strict=True))
            out.append(Outgoing(self.partners[party - 1], Record(
                tree=len(self.trees), depth=self.depth, nodes=nodes.astype(np.int32),
                columns=columns.astype(np.int32), bins=bins.astype(np.int32), missing_left=missing.astype(np.uint8))))
        self.seconds["histograms"] += time.perf_counter() - began
        if not asks:
            return out + self._next_level()
        self._phase, self._waiting = "assigned", {self.partners[party - 1] for party in asks}
        return out

    def _order(self, own: np.ndarray) -> tuple[np.ndarray, list[Outgoing]]:
        """At the first tree's root: renumber its own categorical codes and every partner's by their root cells
        (:func:`~vsplit.boosting.gains.category_ranks`), this level's histograms with them; its own renumbered
        histograms, and each partner's :class:`~vsplit.boosting.messages.Order` (sent before any record)."""
        own_cols, row = self.categorical, root_row_hessian(self.labels, self.params)
        if own_cols:
            ranks = category_ranks(own[0], own_cols, self.params, row_hessian=row)
            self.ranks = full_ranks(self.codes.shape[1], self.width, dict(zip(own_cols, ranks, strict=True)))
            self.codes = rank_codes(self.codes, self.ranks)
            own = reorder(own, own_cols, ranks)
        out = []
        for p in self.partners:
            cols = self._partner_categorical.get(p, ())
            if not cols:
                continue
            ranks = category_ranks(self._partner_hist[p][0], cols, self.params, row_hessian=row)
            self._partner_hist[p] = reorder(self._partner_hist[p], cols, ranks)
            out.append(Outgoing(p, Order(columns=np.array(cols, dtype=np.int32), ranks=ranks)))
        return own, out

    def _assigned(self, sender: str, msg: Assigned) -> None:
        party = self.partners.index(sender) + 1
        wins = self._asked[party]
        if msg.tree != len(self.trees) or msg.depth != self.depth or len(msg.records) != len(wins):
            raise ProtocolError(f"boosting: {sender!r} answered a record out of step")
        if len(msg.left) != len(self.labels):
            raise ProtocolError(f"boosting: {sender!r} sent {len(msg.left)} left flags for {len(self.labels)} rows")
        for (node, column, bin_, missing), record in zip(wins, msg.records.tolist(), strict=True):
            self.splits[node] = Split(party=party, column=column, bin=bin_, missing_left=missing, record=record)
            self.chosen[node] = msg.left.astype(bool)

    def _next_level(self) -> list[Outgoing]:
        self.nodes = grow_level(self.nodes, self.chosen)
        self.tree_nodes = np.where(self.nodes >= 0, self.nodes, self.tree_nodes)
        self.depth += 1
        return self._level()

    def _finish_tree(self) -> list[Outgoing]:
        leaves, values = leaves_of(self.tree_nodes, self.gh, self.params)
        self.margin = self.margin + values
        self.trees.append(Tree(splits=self.splits, leaves=leaves, sums=leaf_sums(self.tree_nodes, self.gh)))
        if len(self.trees) < self.params.trees:
            return self._start_tree()
        self.result = BoostModel(trees=tuple(self.trees), base=self.base,
                                 widths=(self.width, *(self.shapes[p][1] for p in self.partners)))
        self.done, self._waiting = True, set()
        return [Outgoing(p, Finish(trees=len(self.trees))) for p in self.partners]
