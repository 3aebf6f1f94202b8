"""Reading in the caller's thread (issue 28): a frame the caller waits for is opened in its own thread, over a plain
TLS channel and a resumable one; the background reader covers the time nobody calls ``recv`` (acks, drops, a
peer's close) and never races the caller for a frame."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from _transport_support import FAST, LinkEmulator, credentials, make_identities

from vsplit.transport.channel import NothingYet, PeerLost, RecvTimeout
from vsplit.transport.connect import Listener, dial
from vsplit.transport.reconnect import StandingListener, dial_resumable
from vsplit.transport.resume import ResumeOptions


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer"])


def tls_pair(ids, options=FAST):
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=options)
    with ThreadPoolExecutor(max_workers=1) as pool:
        accepted = pool.submit(hub.accept_one, timeout_s=5)
        partner = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address, deadline_s=5,
                       options=options)
        bank = accepted.result(timeout=5)
    hub.close()
    return bank, partner


def resumable_pair(ids, *, via=None, timeout_s=10.0):
    resume = ResumeOptions(timeout_s=timeout_s)
    hub = StandingListener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST,
                           resume=resume)
    link = LinkEmulator(target=hub.address, delay_s=0) if via else None
    partner = dial_resumable(credentials("insurer", ids, ["bank"]), peer="bank", options=FAST, resume=resume,
                             address=link.address if link else hub.address, deadline_s=10)
    bank = hub.accept_all(deadline_s=10)["insurer"]
    return hub, link, bank, partner


def opening_threads(link) -> list[int]:
    """Record the thread of every call that opens TLS records of frames on ``link`` (heartbeats aside: the
    background reader takes those while the caller is elsewhere)."""
    seen: list[int] = []
    layer = link._layer
    original = layer.read_into

    def open_and_note(room):
        n = original(room)
        if n is not None and n > 64:
            seen.append(threading.get_ident())
        return n

    layer.read_into = open_and_note
    return seen


def send_when_waited_for(channel, frames, link):
    """Send ``frames`` once the receiver is inside ``recv`` (registered as reading ``link``)."""

    def go():
        wait_for(lambda: link._readers)
        time.sleep(0.002)
        for frame in frames:
            channel.send(frame)

    thread = threading.Thread(target=go)
    thread.start()
    return thread


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.001)


def test_a_plain_tls_frame_is_opened_in_the_thread_that_waits_for_it(ids):
    bank, partner = tls_pair(ids)
    seen = opening_threads(bank)
    for i in range(20):
        sender = send_when_waited_for(partner, [bytes([i]) * 100_000], bank)
        assert bytes(bank.recv(timeout=5)) == bytes([i]) * 100_000
        sender.join()
    assert seen and set(seen) == {threading.get_ident()}, "a frame the caller waited for crossed a thread"
    bank.close()
    partner.close()


def test_a_resumable_frame_is_opened_and_numbered_in_the_thread_that_waits_for_it(ids):
    hub, _, bank, partner = resumable_pair(ids)
    link = bank._link
    seen = opening_threads(link)
    for i in range(20):
        sender = send_when_waited_for(partner, [bytes([i + 1]) * 70_000], link)
        assert bytes(bank.recv(timeout=5)) == bytes([i + 1]) * 70_000
        sender.join()
    assert seen and set(seen) == {threading.get_ident()}, "a frame the caller waited for crossed a thread"
    assert bank.received == 20
    for channel in (partner, bank):
        channel.close()
    hub.close()


def test_frames_read_by_the_background_while_nobody_calls_recv_come_first_and_in_order(ids):
    """Frames arrive while the caller computes (the background reads them) and while it waits (it reads them)."""
    hub, _, bank, partner = resumable_pair(ids)
    frames = [i.to_bytes(4, "little") * 500 for i in range(300)]

    def stream():
        for i, frame in enumerate(frames):
            partner.send(frame)
            if i % 7 == 0:
                time.sleep(0.002)

    sender = threading.Thread(target=stream)
    sender.start()
    got = []
    for i in range(len(frames)):
        got.append(bytes(bank.recv(timeout=5)))
        if i % 11 == 0:
            time.sleep(0.01)  # the caller computes: the background reader takes over
    sender.join()
    assert got == frames
    with pytest.raises(NothingYet):
        bank.recv(timeout=0)
    for channel in (partner, bank):
        channel.close()
    hub.close()


def test_two_threads_receiving_from_one_channel_get_every_frame_once(ids):
    bank, partner = tls_pair(ids)
    frames = [i.to_bytes(4, "little") * 64 for i in range(400)]
    got: dict[int, list[int]] = {0: [], 1: []}

    def take(who):
        while True:
            try:
                frame = bank.recv(timeout=1)
            except RecvTimeout:  # the other thread took the last frame
                return
            got[who].append(int.from_bytes(frame[:4], "little"))

    readers = [threading.Thread(target=take, args=(who,)) for who in (0, 1)]
    for reader in readers:
        reader.start()
    for frame in frames:
        partner.send(frame)
    for reader in readers:
        reader.join(timeout=10)
    assert sorted(got[0] + got[1]) == list(range(400))
    assert all(seq == sorted(seq) for seq in got.values())  # each thread sees the stream's order
    bank.close()
    partner.close()


def test_polling_reads_what_is_waiting_without_blocking(ids):
    bank, partner = tls_pair(ids)
    with pytest.raises(NothingYet):
        bank.recv(timeout=0)
    partner.send(b"polled")
    deadline = time.monotonic() + 5
    while True:
        try:
            assert bytes(bank.recv(timeout=0)) == b"polled"
            break
        except NothingYet:
            assert time.monotonic() < deadline
            time.sleep(0.001)
    bank.close()
    partner.close()


def test_a_drop_is_noticed_and_acks_are_sent_while_nobody_calls_recv(ids):
    hub, link, bank, partner = resumable_pair(ids, via=True)
    partner.send(b"one")
    wait_for(lambda: partner._outbox.unacknowledged == 0)  # the bank acknowledged it without any recv
    link.reset_now()
    wait_for(lambda: bank.reconnects and partner.reconnects)  # both sides saw the drop; the partner redialed
    wait_for(lambda: bank.state == "up" and partner.state == "up")
    assert bytes(bank.recv(timeout=5)) == b"one"
    for channel in (partner, bank):
        channel.close()
    hub.close()
    link.close()


def test_a_silent_peer_is_lost_while_nobody_calls_recv(ids):
    quick = FAST.__class__(heartbeat_s=0.05, idle_timeout_s=0.3, linger_s=0.1)
    bank, partner = tls_pair(ids, options=quick)
    partner._stop.set()  # the partner's heartbeats stop; the partner stays connected but says nothing
    wait_for(lambda: bank.ended, timeout=3)
    with pytest.raises(PeerLost, match="not even a heartbeat"):
        bank.recv(timeout=1)
    bank.close()
    partner.close()
