"""The partner's machine: its own coefficients, updated from masked gradients it computes on ciphertexts.

Theory of operation: the partner holds its WOE inputs (:class:`~vsplit.scorecard.columns.WoeColumns`), never a label.
It reads the label party's key, refusing a scheme or size it does not accept, then every step: it sends its per-row
linear score at its look-ahead coefficients (:class:`~vsplit.scorecard.messages.LinearScores`); it receives the
residuals, one ciphertext a row, and sums them per coarse bin of each attribute (one ``batch_select_sum``), multiplies
each bin's sum by the bin's WOE in fixed point and adds up the bins of each attribute: one ciphertext per attribute,
the attribute's gradient sum ``sum_b woe_b * sum_{i in b} d_i``. It adds a fresh encryption of a random mask of 64
bits more than the sum can need (so the label party's plaintext tells nothing of the sum), sends it, gets the
decrypted masked sum back, removes the mask and takes its step. What it learns: its own gradient each step (as in
FATE's hetero LR), never a label, a residual or the label party's score.

Example:
    >>> import numpy as np
    >>> from vsplit.scorecard.columns import WoeColumns
    >>> cols = WoeColumns(names=("age",), woe=(np.array([-0.4, 0.3]),), codes=np.array([[0], [1], [1]]))
    >>> PartnerScorecard(cols, label="bank").start()
    []
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.he import MIN_KEY_BITS, Ciphertexts, PublicKey, decode_ciphertexts, encode_ciphertexts
from vsplit.he._lib import heu_modules
from vsplit.protocol.answering import AnswersLabel
from vsplit.protocol.machine import Outgoing
from vsplit.scorecard.columns import WoeColumns
from vsplit.scorecard.messages import (
    INT_BYTES,
    VERSION,
    LinearScores,
    MaskedGradient,
    PartnerCard,
    Residuals,
    ScoreHello,
    ScoreReady,
    Unmasked,
    bytes_to_ints,
)
from vsplit.scorecard.params import ScorecardParams, momentum
from vsplit.scorecard.points import PointsTable, Scaling

#: bits of a mask beyond the largest gradient sum: the statistical distance of the masked sum from uniform
MASK_MARGIN_BITS = 64


class PartnerScorecard(AnswersLabel):
    """A partner's side of training; its ``result`` is its coefficients (one per attribute of ``columns``).

    Args:
        columns: its WOE inputs on the aligned rows.
        label: the label party's name.
        schemes, min_key_bits, insecure_small_key_for_tests: which keys it accepts (see
            :meth:`vsplit.he.PublicKey.from_bytes`).
        share_names, share_points: what its entry in the label party's model card shows beyond its number of
            attributes (its attribute names; its points table, bin labels included).
    """

    protocol = "scorecard partner"

    def __init__(self, columns: WoeColumns, *, label: str = "bank", schemes: tuple[str, ...] = ("ou",),
                 min_key_bits: int = MIN_KEY_BITS, insecure_small_key_for_tests: bool = False,
                 share_names: bool = False, share_points: bool = False) -> None:
        if not columns.names or not columns.rows:
            raise ProtocolError("scorecard partner: no attribute or no row to train on", local=True)
        self.columns, self.label = columns, label
        self.share_names, self.share_points = share_names, share_points
        self.scaling: Scaling | None = None
        self.x = columns.matrix()
        self._accept = {"schemes": schemes, "min_key_bits": min_key_bits,
                        "insecure_small_key_for_tests": insecure_small_key_for_tests}
        self._public: PublicKey | None = None
        self.params: ScorecardParams | None = None
        self.w = np.zeros(len(columns.names))
        self._prev = self.w
        self._look = self.w
        self._masks: list[int] = []
        self._mask_bits = 0
        self.step = 0
        self._expect: tuple[type, ...] = (ScoreHello,)
        self.done = False
        self.result: np.ndarray | None = None

    def _handlers(self) -> dict[type, Any]:
        return {ScoreHello: self._hello, Residuals: self._residuals, Unmasked: self._unmasked}

    def _hello(self, msg: ScoreHello) -> list[Outgoing]:
        if msg.version != VERSION:
            raise ProtocolError(f"scorecard: the label party speaks version {msg.version}, this party {VERSION}")
        if msg.rows != self.columns.rows:
            raise ProtocolError(f"scorecard: the label party has {msg.rows} aligned rows, this party "
                                f"{self.columns.rows}; align both on the same rows first")
        self._public = PublicKey.from_bytes(msg.key.tobytes(), **self._accept)
        self.params = ScorecardParams(iterations=msg.iterations, learning_rate=msg.learning_rate, l2=msg.l2,
                                      residual_scale=msg.residual_scale, woe_scale=msg.woe_scale)
        self.scaling = Scaling(base_score=msg.base_score, base_odds=msg.base_odds, pdo=msg.pdo)
        self._woe_q = [int(v) for t in self.columns.woe for v in np.rint(t * msg.woe_scale).astype(np.int64)]
        largest = msg.rows * msg.residual_scale * max(1, max(abs(v) for v in self._woe_q))
        self._mask_bits = largest.bit_length() + MASK_MARGIN_BITS
        if self._mask_bits + 2 > min(self._public.plaintext_bits, 8 * INT_BYTES - 1):
            raise ProtocolError(f"scorecard: masked sums of {self._mask_bits} bits do not fit the key's "
                                f"{self._public.plaintext_bits}-bit plaintexts; lower scorecard.residual_scale")
        self._groups, self._ranges, start = [], [], 0
        for j, table in enumerate(self.columns.woe):  # a loop over attributes, then over their bins
            codes = self.columns.codes[:, j]
            order = np.argsort(codes, kind="stable")
            edges = np.searchsorted(codes[order], np.arange(len(table) + 1))
            self._groups += [order[edges[k]:edges[k + 1]].tolist() for k in range(len(table))]
            self._ranges.append(list(range(start, start + len(table))))
            start += len(table)
        self._expect = (Residuals,)
        return [Outgoing(self.label, ScoreReady(attributes=len(self.columns.names))), self._scores()]

    def _scores(self) -> Outgoing:
        m = momentum(self.step)
        self._look = self.w + m * (self.w - self._prev)
        return Outgoing(self.label, LinearScores(step=self.step, values=self.x @ self._look))

    def _residuals(self, msg: Residuals) -> list[Outgoing]:
        if msg.step != self.step:
            raise ProtocolError(f"scorecard: residuals of step {msg.step}, expected step {self.step}")
        assert self._public is not None
        phe, _ = heu_modules()
        kit = self._public.kit
        evaluator = kit.evaluator()
        column = decode_ciphertexts(msg.frame.tobytes(), public=self._public, expected_count=self.columns.rows)
        per_bin = evaluator.batch_select_sum(column.array, self._groups)
        weighted = evaluator.mul(per_bin, kit.array(np.array(self._woe_q, dtype=object), phe.BigintEncoderParams()))
        sums = evaluator.batch_select_sum(weighted, self._ranges)
        self._masks = [secrets.randbits(self._mask_bits) for _ in self.columns.names]  # never reused, never sent
        masks = kit.encryptor().encrypt(kit.array(np.array(self._masks, dtype=object), phe.BigintEncoderParams()))
        masked = Ciphertexts(public=self._public, array=evaluator.add(sums, masks))
        frame = np.frombuffer(encode_ciphertexts(masked), dtype=np.uint8)
        self._expect = (Unmasked,)
        return [Outgoing(self.label, MaskedGradient(step=self.step, frame=frame))]

    def _unmasked(self, msg: Unmasked) -> list[Outgoing]:
        assert self.params is not None
        if msg.step != self.step or len(msg.values) != len(self.columns.names):
            raise ProtocolError(f"scorecard: {len(msg.values)} unmasked sums of step {msg.step}; expected "
                                f"{len(self.columns.names)} of step {self.step}")
        p, n = self.params, self.columns.rows
        sums = [v - r for v, r in zip(bytes_to_ints(msg.values), self._masks, strict=True)]
        if any(abs(s) >> (self._mask_bits - MASK_MARGIN_BITS) for s in sums):
            raise ProtocolError("scorecard: the label party returned a gradient sum out of range")
        gradient = np.array([float(s) for s in sums]) / (p.residual_scale * p.woe_scale * n)
        self._prev = self.w
        self.w = self._look - p.learning_rate * (gradient + p.l2 * self._look)
        self._masks = []
        self.step += 1
        if self.step == p.iterations:
            self.done, self.result = True, self.w.copy()
            return [Outgoing(self.label, PartnerCard(text=self._card()))]
        self._expect = (Residuals,)
        return [self._scores()]

    def points_table(self) -> PointsTable:
        """This party's points on the label party's scale (after training)."""
        assert self.result is not None and self.scaling is not None
        c = self.columns
        return PointsTable.of(names=c.names, labels=c.labels, woe=c.woe, coef=self.result, scaling=self.scaling)

    def _card(self) -> str:
        table = self.points_table()
        card = {"attributes": len(self.columns.names),
                "names": list(self.columns.names) if self.share_names else None,
                "points": [[n if self.share_names else f"#{self.columns.names.index(n)}", lab, round(pts, 6)]
                           for n, lab, pts in table.rows()] if self.share_points else None}
        return json.dumps(card)
