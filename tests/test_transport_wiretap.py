"""A wire tap between two parties sees no customer data over TLS (and, as a control, sees it without TLS)."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest
from _transport_support import FAST, TcpTap, credentials, make_identities

from vsplit.protocol.message import Message, message
from vsplit.transport import codec
from vsplit.transport.connect import Listener, dial
from vsplit.transport.plaintext import ALLOW_ENV, InsecureTransportWarning, insecure_plaintext_channel_for_tests

SESSION = b"wire-tap-session"
CUSTOMER_ID = "CUST-7F3A9-MARKER-0042"
FEATURE = 31337.4242  # a recognisable feature value


@message(0x7E20)
@dataclass(frozen=True)
class CustomerRow(Message):
    customer_id: str
    features: np.ndarray


def secret_frame() -> bytes:
    row = CustomerRow(customer_id=CUSTOMER_ID, features=np.full(16, FEATURE, dtype=np.float64))
    return codec.encode(row, session=SESSION, seq=0)


def markers() -> list[bytes]:
    return [CUSTOMER_ID.encode(), np.float64(FEATURE).tobytes(), SESSION]


def wait_until(condition, timeout=5.0):
    end = time.monotonic() + timeout
    while not condition() and time.monotonic() < end:
        time.sleep(0.01)


def test_wire_tap_sees_no_customer_id_or_feature_value_over_tls(tmp_path):
    ids = make_identities(tmp_path, ["bank", "insurer"])
    hub = Listener(credentials("bank", ids, ["insurer"]), address=("127.0.0.1", 0), options=FAST)
    tap = TcpTap(hub.address)
    with ThreadPoolExecutor(max_workers=1) as pool:
        accepted = pool.submit(hub.accept_all, deadline_s=10)
        partner = dial(credentials("insurer", ids, ["bank"]), peer="bank", address=tap.address, options=FAST)
        channels = accepted.result(timeout=10)
    frame = secret_frame()
    assert all(marker in frame for marker in markers())  # the frame itself does hold them
    partner.send(frame)
    channels["insurer"].send(frame)  # and back the other way
    assert bytes(channels["insurer"].recv(timeout=5)) == frame
    assert bytes(partner.recv(timeout=5)) == frame
    wait_until(lambda: len(tap.client_to_server) >= partner.wire_stats.wire_bytes_sent)
    wire = tap.captured()
    for marker in markers():
        assert marker not in wire
    # The channel's own accounting matches what really crossed the wire in that direction.
    assert len(tap.client_to_server) == partner.wire_stats.wire_bytes_sent
    partner.close()
    channels["insurer"].close()
    tap.close()


def test_wire_tap_control_without_tls_sees_the_customer_id(monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "1")
    server = socket.create_server(("127.0.0.1", 0))
    tap = TcpTap(server.getsockname()[:2])
    client_sock = socket.create_connection(tap.address)
    server_sock, _ = server.accept()
    with pytest.warns(InsecureTransportWarning, match="INSECURE"):
        client = insecure_plaintext_channel_for_tests(client_sock, peer="bank", options=FAST)
        receiver = insecure_plaintext_channel_for_tests(server_sock, peer="insurer", options=FAST)
    client.send(secret_frame())
    assert bytes(receiver.recv(timeout=5)) == secret_frame()
    wait_until(lambda: CUSTOMER_ID.encode() in tap.captured())
    assert all(marker in tap.captured() for marker in markers())  # so the TLS test's tap really taps
    client.close()
    receiver.close()
    server.close()
    tap.close()
