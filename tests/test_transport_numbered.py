"""The sans-IO bookkeeping under resumable channels: strict envelopes, and exactly-once delivery over links that die
at arbitrary points (a simulation of the resume handshake, checked by Hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsplit.errors import ProtocolError
from vsplit.transport import numbered
from vsplit.transport.numbered import Inbound, Outbox, parse

VALID = [numbered.data(3, 2, b"payload"), numbered.goodbye(9, 4), numbered.ack(7), numbered.resume(b"k" * 16, 11)]


@pytest.mark.parametrize("frame", VALID)
def test_every_truncation_or_extension_of_an_envelope_is_refused_or_still_well_formed(frame):
    kind = parse(frame).kind
    for cut in range(len(frame)):
        short = frame[:cut]
        if kind == numbered.DATA and cut > numbered.OVERHEAD:
            assert parse(short).kind == numbered.DATA  # a shorter payload is still a payload
            continue
        with pytest.raises(ProtocolError, match="malformed"):
            parse(short)
    if kind != numbered.DATA:
        with pytest.raises(ProtocolError, match="malformed"):
            parse(frame + b"\x00")


def test_unknown_kinds_and_a_resume_without_its_magic_are_refused():
    for kind in (0, 5, 255):
        with pytest.raises(ProtocolError):
            parse(bytes([kind]) + bytes(32))
    bad = bytearray(numbered.resume(b"k" * 16, 0))
    bad[1:9] = b"VSRESUM2"
    with pytest.raises(ProtocolError):
        parse(bytes(bad))


def test_an_ack_beyond_what_was_sent_or_a_resume_behind_an_ack_is_a_protocol_violation():
    box = Outbox(limit=1 << 20)
    for _ in range(3):
        box.add(lambda seq: numbered.data_head(seq, 0), b"x")
    with pytest.raises(ProtocolError, match="only 3 were sent"):
        box.acknowledge(4)
    box.acknowledge(2)
    with pytest.raises(ProtocolError, match="not the same session"):
        box.resume(1)
    assert [parse(b"".join(e)).seq for e in box.resume(2)] == [2]


def test_the_resend_buffer_keeps_at_most_its_limit_but_always_one_frame():
    box = Outbox(limit=100)
    assert box.room_for(1000)  # empty: one frame always fits
    box.add(lambda seq: numbered.data_head(seq, 0), bytes(1000))
    assert not box.room_for(1)
    box.acknowledge(1)
    assert box.nbytes == 0 and box.room_for(83)


class End:
    """One side's numbering state, with what it delivered."""

    def __init__(self) -> None:
        self.outbox, self.inbound, self.delivered = Outbox(limit=1 << 30), Inbound(), []

    def send(self, payload: bytes) -> bytes:
        return b"".join(self.outbox.add(lambda seq: numbered.data_head(seq, self.inbound.received), payload))

    def take(self, frame: bytes) -> None:
        env = parse(frame)
        self.outbox.acknowledge(env.ack)
        if env.kind == numbered.DATA and self.inbound.accept(env.seq):
            self.delivered.append(frame[numbered.OVERHEAD :])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.booleans()), min_size=1, max_size=60))
def test_frames_survive_links_dying_anywhere_exactly_once_and_in_order(script):
    """Each step sends a frame one way; some frames reach the peer late or never (the link dies with them in flight,
    ``lag``), some links die; after each death both sides exchange what they received and resend the rest."""
    a, b = End(), End()
    in_flight: dict[str, list[bytes]] = {"ab": [], "ba": []}
    sent = {"ab": [], "ba": []}
    for i, (a_to_b, lag, dies) in enumerate(script):
        way, src = ("ab", a) if a_to_b else ("ba", b)
        payload = f"{way}{i}".encode()
        sent[way].append(payload)
        in_flight[way].append(src.send(payload))
        for direction, receiver in (("ab", b), ("ba", a)):  # all but the last ``lag`` frames arrive
            keep = in_flight[direction][len(in_flight[direction]) - lag :] if lag else []
            for frame in in_flight[direction][: len(in_flight[direction]) - len(keep)]:
                receiver.take(frame)
            in_flight[direction] = keep
        if dies:  # what was in flight is lost; the RESUME exchange says what each side has
            in_flight = {"ab": [b"".join(e) for e in a.outbox.resume(b.inbound.received)],
                         "ba": [b"".join(e) for e in b.outbox.resume(a.inbound.received)]}
            in_flight["ab"] = in_flight["ab"] + in_flight["ab"][:1]  # and a duplicate, as from a late old link
    for frame in in_flight["ab"]:
        b.take(frame)
    for frame in in_flight["ba"]:
        a.take(frame)
    assert b.delivered == sent["ab"] and a.delivered == sent["ba"]
