"""The privacy tests' leak check (tests/_leaks.py) finds a secret a party sends, and no chance byte match."""

from __future__ import annotations

import numpy as np
from _leaks import leaks

from vsplit.protocol.training.messages import EVAL, Activations
from vsplit.transport.codec import decode, encode


def _activations(values: np.ndarray) -> tuple[Activations, bytes]:
    sent = Activations(cut=0, slot=0, phase=EVAL, epoch=1, step=0, values=values.astype(np.float32))
    frame = bytes(encode(sent, session=bytes(16), seq=0))
    return decode(frame)[1], frame


def test_a_raw_value_sent_as_an_activation_is_found_at_float32_and_float64_precision():
    secret = np.array([105.0, 0.1, -1680.25])
    for carried in (np.float32, np.float64):
        values = np.array([[0.3, carried(0.1)], [-1680.25, 7.0]], np.float32)
        message, frame = _activations(values)
        assert leaks(message, frame, secret) == ["Activations.values holds -1680.25", "Activations.values holds 0.1"]
    assert leaks(*_activations(np.array([[0.3, 106.0]])), secret) == []


def test_a_chance_byte_match_across_padding_and_an_activation_is_not_a_leak():
    # 105.0 in float32 is 00 00 d2 42; an activation whose low bytes are d2 42 after two zero bytes reads the same
    lucky = np.frombuffer(b"\xd2\x42\x10\x3e", np.float32)
    message, frame = _activations(np.concatenate([[0.0], lucky, [0.5]]).reshape(1, 3))
    assert np.float32(105).tobytes() in frame  # what the old byte search flagged
    assert leaks(message, frame, [105]) == []
