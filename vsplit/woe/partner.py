"""The partner's machine: encrypted label counts per fine bin of its own attributes, then its WOE maps.

Theory of operation: the partner holds each aligned row's fine bin in each of its attributes (:mod:`vsplit.woe.fine`),
never a label. It reads the label party's key, refusing a scheme or size it does not accept, and the ciphertexts of
every row's packed pair (1, label). Per attribute it adds them by fine bin (:func:`vsplit.he.group_sums` through a
:mod:`vsplit.boosting.backend`, so the additions can use every core), leaving out the attribute's largest bin (the
label party derives it from its totals), packs the sums and sends them. It refuses to sum a bin of fewer than
``min_bin_rows`` rows. The label party answers with the coarse classing of its fine bins (indices only), the WOE of
each coarse bin and each attribute's IV: the partner's :class:`~vsplit.woe.maps.WoeMap` per attribute.

What the partner learns: ciphertexts only, then per coarse bin its WOE. With the bins' row counts, which it has,
an attribute's WOE values solve for each coarse bin's event count and the total (``e_i = n_i / (1 + exp(WOE_i) *
(N - E) / E)`` with ``sum e_i = E``): label counts of groups of at least ``min_bin_share`` of the rows, never a row's.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.woe.fine import fit_fine_bins
    >>> fine = fit_fine_bins(pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0]}), max_bins=2)
    >>> PartnerWoe(fine, codes=np.array([[0], [0], [1], [1]])).start()
    []
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vsplit.boosting.backend import Backend, SerialBackend
from vsplit.errors import ProtocolError
from vsplit.he import MIN_KEY_BITS, Ciphertexts, Packing, PublicKey, decode_ciphertexts
from vsplit.protocol.answering import AnswersLabel
from vsplit.protocol.machine import Outgoing
from vsplit.woe.fine import CATEGORY, FineBins
from vsplit.woe.maps import WoeMap
from vsplit.woe.messages import VERSION, WoeClassing, WoeHello, WoeLabels, WoeShape, WoeSums
from vsplit.woe.result import PartyBinning

#: per row: 1 (a count) and the label, each at most 1
BOUNDS = (1.0, 1.0)


def label_packing(rows: int, plaintext_bits: int) -> Packing:
    """The packing both sides plan: (1, label) a row, exact sums over ``rows`` rows."""
    return Packing.plan(scale=1, bounds=BOUNDS, max_rows=rows, plaintext_bits=plaintext_bits)


def bin_groups(codes: np.ndarray, n_bins: Sequence[int]) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    """The row groups to sum (every fine bin of every attribute but its largest), the largest bin of each attribute
    and each bin's row count (all attributes' bins in order)."""
    groups: list[list[int]] = []
    skipped, sizes = [], []
    for column, n in enumerate(n_bins):  # a loop over attributes
        code = codes[:, column]
        order = np.argsort(code, kind="stable")
        bounds = np.searchsorted(code[order], np.arange(n + 1))
        size = np.diff(bounds)
        largest = int(np.argmax(size))
        skipped.append(largest)
        sizes.append(size)
        groups += [order[bounds[b] : bounds[b + 1]].tolist() for b in range(n) if b != largest]
    return groups, np.asarray(skipped, dtype=np.int32), np.concatenate(sizes)


class PartnerWoe(AnswersLabel):
    """A partner's side of the binning.

    Args:
        fine: its attributes' fine bins (:func:`~vsplit.woe.fine.fit_fine_bins` on its aligned rows).
        codes: int ``(rows, attributes)``, each aligned row's fine bin.
        label: the label party's name.
        share_names: send the attributes' names (else the label party knows them as ``<party>#<k>``).
        min_bin_rows: refuse to sum a non-empty bin of fewer rows.
        schemes, min_key_bits, insecure_small_key_for_tests: which keys it accepts.
        backend: where the sums are made (:mod:`vsplit.boosting.backend`; default: this process).
    """

    protocol = "woe partner"

    def __init__(self, fine: Sequence[FineBins], *, codes: np.ndarray, label: str = "bank", share_names: bool = False,
                 min_bin_rows: int = 1, schemes: tuple[str, ...] = ("ou",), min_key_bits: int = MIN_KEY_BITS,
                 insecure_small_key_for_tests: bool = False, backend: Backend | None = None) -> None:
        self.fine = list(fine)
        self.codes = np.asarray(codes, dtype=np.int64)
        self.n_bins = [f.n_bins for f in self.fine]
        if self.codes.ndim != 2 or self.codes.shape[1] != len(self.fine) or not self.codes.size or \
                (self.codes.min(axis=0) < 0).any() or (self.codes.max(axis=0) >= self.n_bins).any():
            raise ProtocolError("woe partner: codes must be (rows, attributes) within each attribute's fine bins",
                                local=True)
        self.label, self.share_names, self.min_bin_rows = label, share_names, min_bin_rows
        self.backend: Backend = backend or SerialBackend()
        self._accept = {"schemes": schemes, "min_key_bits": min_key_bits,
                        "insecure_small_key_for_tests": insecure_small_key_for_tests}
        self._expect: tuple[type, ...] = (WoeHello,)
        self._public: PublicKey | None = None
        self._packing: Packing | None = None
        self.done = False
        self.result: PartyBinning | None = None

    def _handlers(self) -> dict[type, Any]:
        return {WoeHello: self._hello, WoeLabels: self._labels, WoeClassing: self._classing}

    def _hello(self, msg: WoeHello) -> list[Outgoing]:
        if msg.version != VERSION:
            raise ProtocolError(f"woe: the label party speaks version {msg.version}, this party {VERSION}")
        if msg.rows != len(self.codes):
            raise ProtocolError(f"woe: the label party has {msg.rows} aligned rows, this party {len(self.codes)}; "
                                "align both on the same rows first")
        self._public = PublicKey.from_bytes(msg.key.tobytes(), **self._accept)
        self._packing = label_packing(msg.rows, self._public.plaintext_bits)
        if msg.slot_bits != self._packing.slot_bits:
            raise ProtocolError(f"woe: {msg.slot_bits}-bit slots announced, {self._packing.slot_bits} planned")
        self._expect = (WoeLabels,)
        names = "\n".join(f.name.replace("\n", " ") for f in self.fine) if self.share_names else ""
        kinds = np.array([f.kind == CATEGORY for f in self.fine], dtype=np.uint8)
        return [Outgoing(self.label, WoeShape(bins=np.array(self.n_bins, dtype=np.uint16), kinds=kinds, names=names))]

    def _labels(self, msg: WoeLabels) -> list[Outgoing]:
        assert self._public is not None and self._packing is not None
        frame = msg.frame.tobytes()
        column: Ciphertexts = decode_ciphertexts(frame, public=self._public, expected_count=len(self.codes))
        groups, skipped, sizes = bin_groups(self.codes, self.n_bins)
        small = np.nonzero((sizes > 0) & (sizes < self.min_bin_rows))[0]
        if small.size:
            attribute = int(np.searchsorted(np.cumsum(self.n_bins), small[0], side="right"))
            raise ProtocolError(f"woe: attribute {self.fine[attribute].name!r} has a bin of "
                                f"{int(sizes[small[0]])} rows, fewer than woe.min_bin_rows = {self.min_bin_rows}; "
                                "bin it more coarsely (woe.fine_bins)", local=True)
        packed = self.backend.sums(column, frame, groups, packing=self._packing)
        self._expect = (WoeClassing,)
        return [Outgoing(self.label, WoeSums(frame=np.frombuffer(packed, dtype=np.uint8), skipped=skipped))]

    def _classing(self, msg: WoeClassing) -> list[Outgoing]:
        if len(msg.n_coarse) != len(self.fine) or len(msg.coarse) != sum(self.n_bins):
            raise ProtocolError(f"woe: a classing of {len(msg.n_coarse)} attributes and {len(msg.coarse)} fine bins; "
                                f"this party has {len(self.fine)} and {sum(self.n_bins)}")
        maps, ivs = [], {}
        fine_at = np.cumsum([0, *self.n_bins])
        woe_at = np.cumsum([0, *msg.n_coarse.astype(np.int64)])
        for k, fine in enumerate(self.fine):  # a loop over attributes
            coarse = msg.coarse[fine_at[k] : fine_at[k + 1]].astype(np.int64)
            maps.append(WoeMap(fine=fine, coarse_of_fine=coarse, woe=msg.woe[woe_at[k] : woe_at[k + 1]].copy()))
            ivs[fine.name] = float(msg.iv[k])
        self.result = PartyBinning(maps=maps, iv=ivs)
        self.done = True
        return []
