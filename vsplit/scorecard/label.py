"""The label party's machine: its own coefficients and the intercept, encrypted residuals, masked gradients.

Theory of operation: every step the label party waits for each partner's per-row linear score ``u_p`` at the
look-ahead coefficients (:class:`~vsplit.scorecard.messages.LinearScores`), adds its own and the intercept, computes
the residuals ``d = sigmoid(z) - y`` and updates its own coefficients in the clear. It sends ``d`` encrypted, one
ciphertext a row (fixed point ``round(d * residual_scale)``); each partner returns one ciphertext per attribute, its
gradient sum plus a mask only it knows (:class:`~vsplit.scorecard.messages.MaskedGradient`); the label party decrypts
them and returns the plaintexts, still masked (:class:`~vsplit.scorecard.messages.Unmasked`). What it learns of a
partner: ``u_p`` per row and step (so which rows share a combination of the partner's bins, and how the partner's
part of the score moves), the partner's number of attributes; never a WOE value, a bin, a coefficient or a gradient.

The run's key pair is made here (2048-bit OU by default) unless one is passed; the secret key stays in this process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.he import KeyPair, Packing, decode_ciphertexts, encode_ciphertexts, encrypt_rows, generate_keypair
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.scorecard.messages import (
    VERSION,
    LinearScores,
    MaskedGradient,
    PartnerCard,
    Residuals,
    ScoreHello,
    ScoreReady,
    Unmasked,
    ints_to_bytes,
)
from vsplit.scorecard.params import ScorecardParams, momentum
from vsplit.scorecard.points import Scaling
from vsplit.scorecard.pooled import sigmoid, start_intercept


class LabelScorecard:
    """The label party's side of training; its ``result`` is ``(coefficients, intercept)``.

    Args:
        woe: its own WOE matrix, float ``(rows, attributes)`` (may have 0 attributes).
        labels: 0/1 per aligned row.
        partners: the partners' names.
        params: the settings (sent to the partners).
        scaling: the points scaling (sent to the partners: every party's points are on this scale).
        keys: this run's key pair; made here (``scheme``, ``key_bits``) when not given.
        fit_rows: a mask of the aligned rows to fit on (default: all). The others get a residual of 0, the rows fit
            on one of ``d * rows / fit`` (the partners divide by every aligned row), so every party takes the steps
            :func:`~vsplit.scorecard.fit_pooled` takes on the masked rows; a partner cannot tell which rows are held
            out (each residual is encrypted). The value report's validation rows (:mod:`vsplit.woe.gini`).
    """

    def __init__(self, woe: np.ndarray, *, labels: np.ndarray, partners: Sequence[str], params: ScorecardParams,
                 scaling: Scaling | None = None, keys: KeyPair | None = None, scheme: str = "ou", key_bits: int = 2048,
                 insecure_small_key_for_tests: bool = False, fit_rows: np.ndarray | None = None) -> None:
        self.x = np.asarray(woe, dtype=np.float64)
        self.labels = np.asarray(labels, dtype=np.float64)
        if self.x.ndim != 2 or len(self.x) != len(self.labels):
            raise ProtocolError("scorecard: the WOE matrix and labels must cover the same aligned rows", local=True)
        self.fit = np.ones(len(self.labels), bool) if fit_rows is None else np.asarray(fit_rows, dtype=bool)
        if self.fit.shape != self.labels.shape or not self.fit.any():
            raise ProtocolError("scorecard: fit_rows must mask the aligned rows and keep at least one", local=True)
        self.partners, self.params, self.scaling = list(partners), params, scaling or Scaling()
        #: what each partner chose to show in the model card (after training)
        self.cards: dict[str, dict[str, Any]] = {}
        if not self.partners:
            raise ProtocolError("scorecard: no partner; train a bank-only scorecard with fit_pooled", local=True)
        self.keys = keys or generate_keypair(scheme=scheme, key_bits=key_bits,
                                             insecure_small_key_for_tests=insecure_small_key_for_tests)
        #: a residual's factor: every aligned row over the rows fit on (1 without fit_rows)
        self.spread = len(self.labels) / int(self.fit.sum())
        self.packing = Packing.plan(scale=params.residual_scale, bounds=(self.spread,), max_rows=len(self.labels),
                                    plaintext_bits=self.keys.public.plaintext_bits)
        self.w = np.zeros(self.x.shape[1])
        self.b = start_intercept(self.labels[self.fit])
        self._prev = (self.w, self.b)
        self.attributes: dict[str, int] = {}
        self._scores: dict[str, np.ndarray] = {}
        self.step = 0
        self._waiting: set[str] = set()
        self._phase = "hello"
        self.done = False
        self.result: tuple[np.ndarray, float] | None = None

    def expects(self, peer: str) -> bool:
        """Every partner speaks until the last step (its scores of the next step may come before others' gradients),
        and until its card is here (after the card it may close its channel while others' gradients are awaited)."""
        return not self.done and peer in self.partners and peer not in self.cards

    def start(self) -> list[Outgoing]:
        """Send the public key and the settings to every partner."""
        p = self.params
        hello = ScoreHello(version=VERSION, rows=len(self.labels), iterations=p.iterations,
                           learning_rate=p.learning_rate, l2=p.l2, residual_scale=p.residual_scale,
                           woe_scale=p.woe_scale, base_score=self.scaling.base_score,
                           base_odds=self.scaling.base_odds, pdo=self.scaling.pdo,
                           key=np.frombuffer(self.keys.public.to_bytes(), dtype=np.uint8))
        self._waiting = set(self.partners)
        return [Outgoing(p, hello) for p in self.partners]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take a partner's message; when a step's messages are all in, go on."""
        if sender not in self.partners or self.done:
            raise ProtocolError(f"scorecard: unexpected {type(msg).__name__} from {sender!r}")
        if isinstance(msg, ScoreReady) and self._phase == "hello" and sender in self._waiting:
            self.attributes[sender] = msg.attributes
            self._waiting.discard(sender)
            if self._waiting:
                return []
            self._phase = "scores"
            return self._residuals() if len(self._scores) == len(self.partners) else []
        if isinstance(msg, LinearScores) and sender in self.attributes:
            expected = self.step + (self._phase == "gradients")
            if msg.step != expected or sender in self._scores or len(msg.values) != len(self.labels):
                raise ProtocolError(f"scorecard: {sender!r} sent scores of step {msg.step} for {len(msg.values)} "
                                    f"rows; expected step {expected} for {len(self.labels)} rows")
            self._scores[sender] = msg.values
            ready = self._phase == "scores" and len(self._scores) == len(self.partners)
            return self._residuals() if ready else []
        if isinstance(msg, MaskedGradient) and self._phase == "gradients" and sender in self._waiting:
            return self._unmask(sender, msg)
        last = self._phase == "gradients" and self.step == self.params.iterations - 1 and sender not in self._waiting
        if isinstance(msg, PartnerCard) and sender not in self.cards and (self._phase == "cards" or last):
            self.cards[sender] = read_card(msg.text, sender=sender)  # a partner's card may come before others' sums
            self._finish_if_carded()
            return []
        raise ProtocolError(f"scorecard: unexpected {type(msg).__name__} from {sender!r} in phase {self._phase}")

    def _residuals(self) -> list[Outgoing]:
        """All scores of this step are in: update the own coefficients, send the encrypted residuals."""
        m = momentum(self.step)
        (prev_w, prev_b), fit = self._prev, self.fit
        look_w, look_b = self.w + m * (self.w - prev_w), self.b + m * (self.b - prev_b)
        z = self.x @ look_w + look_b + sum(self._scores[p] for p in self.partners)
        d = sigmoid(z) - self.labels
        self._prev = (self.w, self.b)
        if self.spread == 1.0:
            self.w = look_w - self.params.learning_rate * (self.x.T @ d / len(d) + self.params.l2 * look_w)
            self.b = look_b - self.params.learning_rate * float(d.mean())
        else:  # the rows fit on only: their residuals, spread over every row for the partners
            self.w = look_w - self.params.learning_rate * (self.x[fit].T @ d[fit] / int(fit.sum())
                                                           + self.params.l2 * look_w)
            self.b = look_b - self.params.learning_rate * float(d[fit].mean())
            d = np.where(fit, d * self.spread, 0.0)
        self._scores = {}
        frame = np.frombuffer(encode_ciphertexts(encrypt_rows(self.keys.public, d, packing=self.packing)),
                              dtype=np.uint8)
        self._phase, self._waiting = "gradients", set(self.partners)
        return [Outgoing(p, Residuals(step=self.step, frame=frame)) for p in self.partners]

    def _finish_if_carded(self) -> None:
        if self._phase == "cards" and len(self.cards) == len(self.partners):
            self.done, self.result = True, (self.w.copy(), float(self.b))

    def _unmask(self, sender: str, msg: MaskedGradient) -> list[Outgoing]:
        if msg.step != self.step:
            raise ProtocolError(f"scorecard: {sender!r} sent the gradient of step {msg.step}, expected {self.step}")
        try:
            sums = decode_ciphertexts(msg.frame.tobytes(), public=self.keys.public,
                                      expected_count=self.attributes[sender])
        except ProtocolError as exc:
            raise ProtocolError(f"scorecard: partner {sender!r} sent a malformed masked gradient ({exc})") from None
        plain = self.keys.kit.decryptor().decrypt(sums.array).to_numpy()
        values = [int(v) for v in np.asarray(plain, dtype=object).ravel()]
        if any(v.bit_length() >= 8 * 32 - 1 for v in values):
            raise ProtocolError(f"scorecard: partner {sender!r} sent a masked gradient wider than 255 bits")
        self._waiting.discard(sender)
        out = [Outgoing(sender, Unmasked(step=self.step, values=ints_to_bytes(values)))]
        if not self._waiting:
            self.step += 1
            if self.step == self.params.iterations:
                self._phase = "cards"
                self._finish_if_carded()
            else:
                self._phase = "scores"
                if len(self._scores) == len(self.partners):
                    out += self._residuals()
        return out


def read_card(text: str, *, sender: str) -> dict[str, Any]:
    """A partner's model-card JSON, checked: ``attributes`` (int), ``names`` and ``points`` (lists or null).

    Example:
        >>> read_card('{"attributes": 1, "names": ["calls"], "points": null}', sender="shop")["names"]
        ['calls']
    """
    try:
        card = json.loads(text, parse_constant=lambda c: None)  # never unpickle or eval peer data: JSON only
    except ValueError:
        card = None
    ok = isinstance(card, dict) and isinstance(card.get("attributes"), int) and set(card) <= {
        "attributes", "names", "points"}
    if ok:
        names, points = card.get("names"), card.get("points")
        ok = (names is None or (isinstance(names, list) and all(isinstance(n, str) for n in names))) and (
            points is None or (isinstance(points, list) and all(
                isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and isinstance(r[1], str)
                and isinstance(r[2], (int, float)) for r in points)))
    if not ok:
        raise ProtocolError(f"scorecard: partner {sender!r} sent a malformed model-card entry")
    return card
