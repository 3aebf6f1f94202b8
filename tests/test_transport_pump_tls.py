"""The pump over mutual TLS: real messages between two threads, and an authenticated attacker who sends junk."""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest
from _transport_support import FAST, RawTlsClient, credentials, make_identities

from vsplit.errors import ProtocolError, RemoteAbort, TransportError
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message, message, require, require_array
from vsplit.runtime.pump import Pump
from vsplit.transport import codec
from vsplit.transport.connect import Listener, dial
from vsplit.transport.framing import prefix

SESSION = b"pump-over-tls-01"


@message(0x7E01)
@dataclass(frozen=True)
class Probe(Message):
    """A test message: a step and a float32 matrix."""

    step: int
    values: np.ndarray

    def __post_init__(self) -> None:
        require(self.step >= 0, "step must be >= 0")
        require_array("values", self.values, dtype="float32", ndim=2)


@message(0x7E02)
@dataclass(frozen=True)
class LooseProbe(Message):
    """Probe's twin without validation: lets the attacker build frames Probe would refuse."""

    step: int
    values: np.ndarray


class Echo:
    """The hub: answers each Probe with the values doubled, ``rounds`` times."""

    def __init__(self, rounds: int) -> None:
        self.rounds, self.seen, self.done, self.result = rounds, 0, False, None

    def start(self) -> list[Outgoing]:
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        assert isinstance(msg, Probe)
        self.seen += 1
        self.done = self.seen == self.rounds
        self.result = self.seen
        return [Outgoing(sender, Probe(step=msg.step, values=msg.values * 2))]


class Asker:
    """The partner: sends ``rounds`` Probes one after another and keeps the answers."""

    def __init__(self, rounds: int) -> None:
        self.rounds, self.answers, self.done, self.result = rounds, [], False, None

    def _probe(self, step: int) -> Outgoing:
        return Outgoing("bank", Probe(step=step, values=np.full((64, 8), step, dtype=np.float32)))

    def start(self) -> list[Outgoing]:
        return [self._probe(0)]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        self.answers.append(float(msg.values[0, 0]))
        if len(self.answers) == self.rounds:
            self.done, self.result = True, self.answers
            return []
        return [self._probe(len(self.answers))]


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer"])


def test_pump_runs_machines_over_mutual_tls_between_two_threads(ids):
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)

    def hub_side():
        channels = hub.accept_all(deadline_s=10)
        pump = Pump("bank", channels, session=SESSION, timeout=10)
        try:
            return pump.run(Echo(rounds=20)), pump.stats, channels["insurer"].wire_stats
        finally:
            channels["insurer"].close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        hub_result = pool.submit(hub_side)
        channel = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address, options=FAST)
        pump = Pump("insurer", {"bank": channel}, session=SESSION, timeout=10)
        answers = pump.run(Asker(rounds=20))
        channel.close()
        seen, hub_stats, hub_wire = hub_result.result(timeout=10)
    assert answers == [2.0 * step for step in range(20)]
    assert seen == 20
    assert hub_stats.as_dict()["received"]["Probe"]["frames"] == 20
    assert hub_wire.frames_received == 20
    assert hub_wire.payload_bytes_received == pump.stats.total("sent")


# -- an authenticated but hostile partner ---------------------------------------------------------------------------


def probe_frame(*, seq: int = 0, session: bytes = SESSION, values=None, type_code: int | None = None) -> bytes:
    values = np.ones((2, 3), np.float32) if values is None else values
    frame = bytearray(codec.encode(LooseProbe(step=1, values=values), session=session, seq=seq))
    frame[4:6] = (type_code if type_code is not None else Probe.type_code).to_bytes(2, "little")
    return bytes(frame)


def framed(frame: bytes) -> bytes:
    return prefix(frame) + frame


def half_close(client: RawTlsClient) -> None:
    socket.socket.shutdown(client.sock, socket.SHUT_WR)  # TCP FIN, no TLS close_notify; reading still works


ATTACKS = {
    "truncated frame": (lambda c: (c.send_raw(prefix(b"x" * 100) + b"x" * 50), half_close(c)),
                        TransportError, "in the middle of a frame", AbortCode.TIMEOUT),
    "2 GiB length prefix": (lambda c: c.send_raw((2**31).to_bytes(4, "little")),
                            TransportError, "2147483648 bytes, over the cap", AbortCode.TIMEOUT),
    "wrong dtype": (lambda c: c.send_raw(framed(probe_frame(values=np.ones((2, 3), np.float64)))),
                    ProtocolError, "must have dtype float32", AbortCode.PROTOCOL_VIOLATION),
    "wrong shape": (lambda c: c.send_raw(framed(probe_frame(values=np.ones(6, np.float32)))),
                    ProtocolError, "must have 2 dimensions", AbortCode.PROTOCOL_VIOLATION),
    "unknown message type": (lambda c: c.send_raw(framed(probe_frame(type_code=0x7EFF))),
                             ProtocolError, "unknown message type 0x7eff", AbortCode.PROTOCOL_VIOLATION),
    "another session": (lambda c: c.send_raw(framed(probe_frame(session=b"another-session!"))),
                        ProtocolError, "belongs to another session", AbortCode.PROTOCOL_VIOLATION),
    "replayed sequence number": (lambda c: (c.send_raw(framed(probe_frame(seq=0))), c.read_frame(),
                                            c.send_raw(framed(probe_frame(seq=0)))),
                                 ProtocolError, "out of order.*replayed", AbortCode.PROTOCOL_VIOLATION),
    "garbage frame": (lambda c: c.send_raw(framed(b"\xff" * 64)),
                      ProtocolError, "magic bytes", AbortCode.PROTOCOL_VIOLATION),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_hostile_partner_bytes_make_the_hub_abort_cleanly(ids, attack):
    send_junk, error, text, code = ATTACKS[attack]
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)

    def hub_side():
        channels = hub.accept_all(deadline_s=10)
        try:
            Pump("bank", channels, session=SESSION, timeout=10).run(Echo(rounds=5))
        finally:
            channels["insurer"].close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        outcome = pool.submit(hub_side)
        attacker = RawTlsClient(hub.address, cert=ids["insurer"].cert_path, key=ids["insurer"].key_path,
                                trust=ids["bank"].cert_path, claim="insurer")
        assert attacker.read_hello() == ("bank", "insurer", True)
        send_junk(attacker)
        with pytest.raises(error, match=text):
            outcome.result(timeout=10)
    frames = []
    while (frame := attacker.read_frame(timeout=5)) is not None:
        frames.append(codec.decode(frame)[1])
    attacker.close()
    if attack == "truncated frame":
        # Its FIN without close_notify broke TLS: OpenSSL answered with a TLS alert and the connection can carry
        # nothing more, so the peer learns only that alert (no frame, no text).
        assert frames == []
    else:
        assert isinstance(frames[-1], Abort) and frames[-1].code == code  # the peer learns a code, nothing else


def test_partner_learns_only_the_abort_code(ids):
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)
    with ThreadPoolExecutor(max_workers=1) as pool:
        accepted = pool.submit(hub.accept_all, deadline_s=10)
        channel = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address, options=FAST)
        hub_channels = accepted.result(timeout=10)
    hub_pump = Pump("bank", hub_channels, session=SESSION)
    hub_pump.abort(AbortCode.BAD_DATA)
    with pytest.raises(RemoteAbort, match=r"bank aborted: .*\(code 7\)"):
        Pump("insurer", {"bank": channel}, session=SESSION, timeout=5).run(Asker(rounds=1))
    channel.close()
    hub_channels["insurer"].close()
