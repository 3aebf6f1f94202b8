"""Resumable channels over mutual TLS through the link emulator: a reset connection comes back with every frame
exactly once and in order, strangers stay out, a lost peer is named with the deadline, a goodbye is no drop."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import pytest
from _transport_support import FAST, LinkEmulator, RawTlsClient, credentials, make_identities
from reconnect import pause_after  # benchmarks/reconnect.py (on the path through _transport_support)

from vsplit.errors import TransportError
from vsplit.transport.channel import PeerClosed, PeerLost
from vsplit.transport.reconnect import StandingListener, dial_resumable
from vsplit.transport.resume import ResumableChannel, ResumeOptions

log = logging.getLogger(__name__)
ONE_WAY_S = 0.005  # a 10 ms round trip


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer", "retailer", "stranger"])


class Joined:
    """A bank listening for its partners; the insurer dials through a link emulator, the retailer (if any) directly."""

    def __init__(self, ids, *, partners=("insurer",), timeout_s=10.0, options=FAST, resume=None, delay_s=ONE_WAY_S,
                 **link):
        resume = resume or ResumeOptions(timeout_s=timeout_s)
        self.hub = StandingListener(credentials("bank", ids, partners), address=("127.0.0.1", 0), options=options,
                                    resume=resume)
        self.link = LinkEmulator(target=self.hub.address, delay_s=delay_s, **link)
        self.partners = {
            name: dial_resumable(credentials(name, ids, ["bank"]), peer="bank", options=options, resume=resume,
                                 address=self.link.address if name == "insurer" else self.hub.address, deadline_s=10)
            for name in partners
        }
        self.bank = self.hub.accept_all(deadline_s=10)

    def close(self) -> None:
        for channel in (*self.partners.values(), *self.bank.values()):
            channel.close()
        self.hub.close()
        self.link.close()


def numbered_frame(i: int, size: int = 2048) -> bytes:
    return i.to_bytes(4, "little") * (size // 4)


def receive(channel: ResumableChannel, count: int, arrivals: list[tuple[int, float]]) -> None:
    """Read ``count`` frames, keeping (number, arrival time) of each."""
    for _ in range(count):
        frame = channel.recv(timeout=10)
        arrivals.append((int.from_bytes(frame[:4], "little"), time.monotonic()))
        assert bytes(frame) == numbered_frame(arrivals[-1][0])


def stream(channel: ResumableChannel, count: int) -> None:
    for i in range(count):
        channel.send(numbered_frame(i))
        time.sleep(0.002)


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_stream_through_a_reset_in_each_direction_arrives_exactly_once_in_order(ids):
    count = 300  # about 630 KB each way
    joined = Joined(ids, resets=[("up", 200_000), ("down", 420_000)])
    partner, bank = joined.partners["insurer"], joined.bank["insurer"]
    at_bank: list[tuple[int, float]] = []
    at_partner: list[tuple[int, float]] = []
    threads = [threading.Thread(target=receive, args=(bank, count, at_bank)),
               threading.Thread(target=receive, args=(partner, count, at_partner)),
               threading.Thread(target=stream, args=(partner, count)),
               threading.Thread(target=stream, args=(bank, count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    resets = {r.direction: r.at for r in joined.link.resets_done}
    joined.close()

    assert [i for i, _ in at_bank] == list(range(count))
    assert [i for i, _ in at_partner] == list(range(count))
    assert set(resets) == {"up", "down"} and joined.link.connections == 3
    pauses = {"up (received by the bank)": pause_after(resets["up"], at_bank, until=resets["down"]),
              "down (received by the partner)": pause_after(resets["down"], at_partner, until=float("inf"))}
    text = ", ".join(f"{k}: {v * 1e3:.1f} ms" for k, v in pauses.items())
    log.warning("reconnect pause through a %.0f ms RTT link: %s", 2e3 * ONE_WAY_S, text)
    assert all(p < 2.0 for p in pauses.values()), f"reconnect pauses {text}"
    assert len(partner.reconnects) == 2 and all(r.restored_at is not None for r in partner.reconnects), text
    assert bank.state == partner.state == "done"


def test_strangers_and_another_partners_certificate_are_refused_while_the_honest_partner_resumes(ids, caplog):
    joined = Joined(ids, partners=("insurer", "retailer"))
    insurer, hub_side = joined.partners["insurer"], joined.bank["insurer"]
    insurer.send(b"before the drop")
    assert bytes(hub_side.recv(timeout=5)) == b"before the drop"
    address = joined.link.address
    joined.link.close()  # the insurer's connection is reset and, for now, nothing listens at its address
    wait_for(lambda: hub_side.state == "down")

    hub, bank_pem = joined.hub.address, ids["bank"].cert_path
    stranger = RawTlsClient(hub, cert=ids["stranger"].cert_path, key=ids["stranger"].key_path, trust=bank_pem,
                            claim="insurer")
    assert stranger.read_frame() is None  # the hub ends the handshake: the stranger gets nothing
    stranger.close()
    impostor = RawTlsClient(hub, cert=ids["retailer"].cert_path, key=ids["retailer"].key_path, trust=bank_pem,
                            claim="insurer")
    assert impostor.read_hello() == ("bank", "insurer", False)
    impostor.close()
    wait_for(lambda: len(joined.hub.rejections) >= 2)
    reasons = [str(r) for r in joined.hub.rejections]
    assert any("not pinned" in r for r in reasons), reasons
    assert any("certificate pinned to party 'retailer'" in r for r in reasons), reasons
    assert hub_side.state == "down"  # no stranger took the insurer's place
    joined.partners["retailer"].send(b"undisturbed")  # the other partner's channel never noticed
    assert bytes(joined.bank["retailer"].recv(timeout=5)) == b"undisturbed"

    joined.link = LinkEmulator(target=hub, listen=address, delay_s=ONE_WAY_S)  # the path comes back
    insurer.send(b"after the drop")
    assert bytes(hub_side.recv(timeout=10)) == b"after the drop"
    hub_side.send(b"and back")
    assert bytes(insurer.recv(timeout=5)) == b"and back"
    assert hub_side.state == insurer.state == "up" and len(insurer.reconnects) == 1
    assert "refused a connection" in caplog.text
    joined.close()


def test_a_second_process_of_a_partner_cannot_take_over_its_running_session(ids):
    joined = Joined(ids)
    with pytest.raises(TransportError, match="'bank' still runs a session with an earlier process of 'insurer'"):
        dial_resumable(credentials("insurer", ids, ["bank"]), peer="bank", address=joined.hub.address,
                       options=FAST, deadline_s=5)
    joined.partners["insurer"].send(b"still mine")
    assert bytes(joined.bank["insurer"].recv(timeout=5)) == b"still mine"
    assert joined.bank["insurer"].reconnects == []
    joined.close()


def test_past_the_deadline_both_sides_stop_with_an_error_naming_the_peer_and_the_deadline(ids):
    joined = Joined(ids, timeout_s=1.0)
    partner, bank = joined.partners["insurer"], joined.bank["insurer"]
    partner.send(b"last words")
    assert bytes(bank.recv(timeout=5)) == b"last words"
    bank.send(b"sent before the drop")
    time.sleep(0.1)
    joined.link.close()  # reset, and nothing listens there any more
    dropped = time.monotonic()
    assert bytes(partner.recv(timeout=5)) == b"sent before the drop"  # what arrived is still delivered first
    with pytest.raises(PeerLost, match=r"connection to 'bank' dropped .* did not come back within 1 s"):
        partner.recv(timeout=10)
    with pytest.raises(PeerLost, match=r"connection to 'insurer' dropped .* did not come back within 1 s"):
        bank.recv(timeout=10)
    assert time.monotonic() - dropped < 4
    with pytest.raises(PeerLost, match=r"network\.reconnect_timeout_s"):
        partner.send(b"too late")
    began = time.monotonic()
    joined.close()
    assert time.monotonic() - began < 1  # closing a lost channel does not wait again


def test_a_goodbye_is_a_clean_close_even_when_the_link_drops_just_before_it(ids):
    joined = Joined(ids)
    partner, bank = joined.partners["insurer"], joined.bank["insurer"]
    for i in range(5):
        partner.send(numbered_frame(i, 64))
    joined.link.reset_now()  # the frames and the goodbye may be lost with the connection: close() delivers them
    partner.close()
    got = [bytes(bank.recv(timeout=10)) for _ in range(5)]
    assert got == [numbered_frame(i, 64) for i in range(5)]
    with pytest.raises(PeerClosed):
        bank.recv(timeout=10)
    wait_for(lambda: bank.state == "done")  # once the partner has closed the link too
    assert joined.link.connections == 2
    joined.close()


def test_a_partner_that_closes_while_the_hub_is_busy_elsewhere_is_a_clean_close_not_a_drop(ids):
    joined = Joined(ids)
    partner, bank = joined.partners["insurer"], joined.bank["insurer"]
    for i in range(3):
        partner.send(numbered_frame(i))
    began = time.monotonic()
    partner.close()  # acknowledged by the hub's channel at once, though nobody there reads yet
    assert time.monotonic() - began < FAST.linger_s
    time.sleep(1.0)  # the hub computes; meanwhile the partner's connection is gone
    assert [bytes(bank.recv(timeout=5)) for _ in range(3)] == [numbered_frame(i) for i in range(3)]
    with pytest.raises(PeerClosed):
        bank.recv(timeout=5)
    assert bank.reconnects == [] and bank.state == "done"
    joined.close()


def test_a_peer_that_closes_on_our_goodbye_before_acknowledging_it_ends_our_close_at_once(ids, monkeypatch):
    """The race CI met: the hub says goodbye, the partner sees it and closes its link before its reader has written
    the acknowledgement. The hub must take that clean close as the end, not as a drop to wait out."""
    joined = Joined(ids, timeout_s=30)
    partner, bank = joined.partners["insurer"], joined.bank["insurer"]
    monkeypatch.setattr(partner, "_send_ack", lambda *a, **k: None)  # the acknowledgement never leaves
    closer = threading.Thread(target=bank.close)
    began = time.monotonic()
    closer.start()
    with pytest.raises(PeerClosed):
        partner.recv(timeout=5)
    partner.close()  # at once: it has the hub's goodbye, so it sends none of its own
    closer.join(timeout=20)
    assert not closer.is_alive() and time.monotonic() - began < 10, "the hub waited for a reconnection"
    assert bank.reconnects == [] and bank.state == "done"
    joined.close()


def test_a_full_resend_buffer_fails_clearly_when_the_peer_stops_reading(ids):
    small = replace(FAST, max_buffered=64 * 1024)
    joined = Joined(ids, options=small, resume=ResumeOptions(timeout_s=10, max_unacked=256 * 1024), delay_s=0)
    partner = joined.partners["insurer"]  # the bank never reads: its inbox fills, then it stops acknowledging
    with pytest.raises(TransportError, match=r"resend buffer to 'bank' is full: .* the peer stopped reading"):
        for i in range(40):
            partner.send(numbered_frame(i, 60 * 1024))
    joined.close()
