"""Strangers before the handshake (issue 29): idle connections hold no handshake slot, one address holds at most a
few, the allow-list closes the others at once, a dialer redials a connection closed before its handshake, and the
refusals are logged at a bounded rate."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
from _transport_support import FAST, credentials, make_identities
from stranger_flood import TLS_START, Flood, client_hello  # benchmarks/ is on the path through _transport_support

from vsplit.transport.admission import AdmissionPolicy, Refused
from vsplit.transport.connect import Listener, dial
from vsplit.transport.reconnect import StandingListener, dial_resumable
from vsplit.transport.refusals import RefusalLog
from vsplit.transport.resume import ResumeOptions

QUICK = AdmissionPolicy(first_record_s=0.3)


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer"])


def wait_for(condition, timeout=5.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)


def test_sixty_four_idle_or_partial_strangers_reopening_do_not_keep_the_partner_out(ids):
    hub = StandingListener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST,
                           resume=ResumeOptions(timeout_s=5), admission=QUICK)
    flood = Flood(hub.address, n=32, limit_s=30).start()
    partial = Flood(hub.address, n=32, sends=TLS_START, sources=("127.0.0.2",), limit_s=30).start()
    try:
        flood.wait_connected()
        partial.wait_connected()
        started = time.monotonic()
        partner = dial_resumable(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address,
                                 options=FAST, deadline_s=10)
        took = time.monotonic() - started
        channels = hub.accept_all(deadline_s=5)
        partner.send(b"through the flood")
        assert bytes(channels["insurer"].recv(timeout=5)) == b"through the flood"
        wait_for(lambda: hub.refusals.total >= 64)  # every idle stranger was closed after 0.3 s
    finally:
        flood.stop()
        partial.stop()
    assert took < 2, took
    assert any("sent no whole TLS record within 0.3 s" in str(r) for r in hub.rejections)
    partner.close()
    channels["insurer"].close()
    hub.close()


def test_one_address_holds_at_most_its_share_of_handshake_slots(ids):
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST,
                   admission=AdmissionPolicy(per_source=4, max_handshakes=8, reserved=0))
    accepted = {}
    thread = threading.Thread(target=lambda: accepted.update(hub.accept_all(deadline_s=10)))
    thread.start()
    stalled = []
    hello = client_hello()
    for _ in range(12):  # each sends a whole ClientHello, then nothing: it would hold a slot for 5 s
        sock = socket.create_connection(hub.address, source_address=("127.0.0.2", 0))
        sock.sendall(hello)
        stalled.append(sock)
    wait_for(lambda: hub.refusals.total >= 8)
    assert all("per-address cap" in str(r) for r in hub.rejections)
    partner = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address, options=FAST,
                   deadline_s=5)
    thread.join(timeout=10)
    assert list(accepted) == ["insurer"]
    for sock in stalled:
        sock.close()
    partner.close()
    accepted["insurer"].close()


def test_allow_list_closes_other_addresses_at_once(ids):
    hub = StandingListener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST,
                           resume=ResumeOptions(timeout_s=5), admission=AdmissionPolicy(allow=("127.0.0.1/32",)))
    stranger = socket.create_connection(hub.address, source_address=("127.0.0.3", 0))
    stranger.settimeout(5)
    assert stranger.recv(1) == b""  # closed before any TLS
    stranger.close()
    wait_for(lambda: hub.refusals.total == 1)
    assert "not in network.allow_from" in str(hub.rejections[0])
    partner = dial_resumable(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address, options=FAST,
                             deadline_s=5)
    channels = hub.accept_all(deadline_s=5)
    partner.close()
    channels["insurer"].close()
    hub.close()


def test_dialer_redials_a_connection_closed_before_its_handshake(ids):
    """The only handshake slot is held by a stalled stranger: the partner's connections are closed at once, and it
    redials with backoff until the stranger's handshake times out."""
    options = FAST.__class__(heartbeat_s=0.1, idle_timeout_s=2.0, handshake_timeout_s=1.0, linger_s=0.2)
    hub = StandingListener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=options,
                           resume=ResumeOptions(timeout_s=5),
                           admission=AdmissionPolicy(max_handshakes=1, per_source=1, reserved=0))
    stalled = socket.create_connection(hub.address, source_address=("127.0.0.2", 0))
    stalled.sendall(client_hello())
    wait_for(lambda: hub.gate.running == 1)
    started = time.monotonic()
    partner = dial_resumable(credentials("insurer", ids, ["bank"]), peer="bank", address=hub.address,
                             options=options, deadline_s=10)
    assert 0.5 < time.monotonic() - started < 5
    assert any("1 handshakes already running" in str(r) for r in hub.rejections)
    channels = hub.accept_all(deadline_s=5)
    stalled.close()
    partner.close()
    channels["insurer"].close()
    hub.close()


def test_a_thousand_refusals_make_a_handful_of_log_lines():
    lines = []
    now = [0.0]
    refusals = RefusalLog("bank", clock=lambda: now[0], emit=lines.append)
    for i in range(1000):
        now[0] = i * 0.05  # 50 s of refusals, 20 a second, from 250 addresses
        refusals.record(f"192.0.2.{i % 250}", Refused(f"connection {i}: it sent no TLS record within 1.5 s"))
    refusals.flush(force=True)
    assert refusals.total == 1000 and len(refusals.recent) == 100
    assert len(lines) <= 5 * 5 + 6  # a burst of 5 per 10 s interval and one aggregate line each
    aggregate = [line for line in lines if "more connection(s)" in line]
    assert len(aggregate) == 5
    assert "refused 195 more connection(s) in the last 10 s from 195 address(es)" in aggregate[0]
    assert aggregate[0].endswith("the last because: connection 199: it sent no TLS record within 1.5 s")


def test_refusals_reach_the_log_aggregated(ids, caplog):
    caplog.set_level(logging.WARNING, logger="vsplit.transport.refusals")
    hub = StandingListener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST,
                           resume=ResumeOptions(timeout_s=5), admission=AdmissionPolicy(allow=("10.0.0.0/8",)))
    for _ in range(30):
        socket.create_connection(hub.address).close()
    wait_for(lambda: hub.refusals.total == 30)
    hub.close()  # the aggregate line of the interval is written at the latest when the listener stops
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 6, messages
    assert "refused 25 more connection(s)" in messages[-1]
