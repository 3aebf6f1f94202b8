"""Mutual TLS on 127.0.0.1: who gets in, who is refused and why, and how channels live and die."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from _transport_support import FAST, RawTlsClient, credentials, make_identities, short_lived_identity

from vsplit.errors import AuthenticationError, ConfigError, TransportError
from vsplit.transport.channel import NothingYet
from vsplit.transport.connect import Listener, dial, open_channels
from vsplit.transport.pinning import Credentials
from vsplit.transport.plaintext import ALLOW_ENV, InsecureTransportWarning, insecure_plaintext_channel_for_tests


@pytest.fixture
def ids(tmp_path):
    return make_identities(tmp_path, ["bank", "insurer", "retailer"])


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


def hub_for(ids, partners=("insurer",), options=FAST) -> Listener:
    return Listener(credentials("bank", ids, partners), address=("127.0.0.1", 0), options=options)


def partner_dial(ids, me, address, *, options=FAST, deadline_s=5.0):
    return dial(credentials(me, ids, ["bank"]), peer="bank", address=address, deadline_s=deadline_s, options=options)


def close_all(*channels):
    for channel in channels:
        channel.close()


# -- the good path ---------------------------------------------------------------------------------------------------


def test_partners_exchange_frames_both_ways_over_mutual_tls(ids, pool):
    hub = hub_for(ids, partners=("insurer", "retailer"))
    accepted = pool.submit(hub.accept_all, deadline_s=10)
    insurer = pool.submit(partner_dial, ids, "insurer", hub.address)
    retailer = pool.submit(partner_dial, ids, "retailer", hub.address)
    channels = accepted.result(timeout=10)
    insurer, retailer = insurer.result(timeout=10), retailer.result(timeout=10)
    assert sorted(channels) == ["insurer", "retailer"]
    assert channels["insurer"].peer_fingerprint == ids["insurer"].fingerprint
    assert insurer.peer_fingerprint == ids["bank"].fingerprint

    big = bytes(range(256)) * 4096  # 1 MiB: several TLS records and send pieces
    insurer.send(b"from insurer")
    retailer.send(big)
    channels["insurer"].send(b"to insurer")
    channels["retailer"].send(big[::-1])
    assert bytes(channels["insurer"].recv(timeout=5)) == b"from insurer"
    assert bytes(channels["retailer"].recv(timeout=5)) == big
    assert bytes(insurer.recv(timeout=5)) == b"to insurer"
    assert bytes(retailer.recv(timeout=5)) == big[::-1]

    stats = retailer.wire_stats
    assert stats.frames_sent == 1 and stats.payload_bytes_sent == len(big)
    assert len(big) < stats.wire_bytes_sent < len(big) * 1.01 + 4096  # TLS + prefix overhead, handshake included
    close_all(insurer, retailer, *channels.values())


def test_open_channels_connects_a_listener_and_a_dialer(ids, pool):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    own = ids["bank"]
    hub = pool.submit(
        open_channels, "bank", role="listen", address=("127.0.0.1", port), own_cert=own.cert_path,
        own_key=own.key_path, peers={"insurer": ids["insurer"].cert_path}, deadline_s=10, options=FAST,
    )
    me = ids["insurer"]
    partner = open_channels(  # dialing before the hub listens: the dialer retries until it is up
        "insurer", role="dial", address=("127.0.0.1", port), own_cert=me.cert_path, own_key=me.key_path,
        peers={"bank": ids["bank"].cert_path}, deadline_s=10, options=FAST,
    )
    channels = hub.result(timeout=10)
    partner["bank"].send(b"ping")
    assert bytes(channels["insurer"].recv(timeout=5)) == b"ping"
    close_all(*partner.values(), *channels.values())


def test_dialer_gives_up_at_its_deadline_when_the_hub_never_comes(ids):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = probe.getsockname()[:2]
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"could not reach 'bank'.*is it running"):
        partner_dial(ids, "insurer", address, deadline_s=0.5)
    assert time.monotonic() - started < 3


def test_open_channels_refuses_a_dialer_with_two_peers_and_an_unknown_role(ids):
    own = ids["insurer"]
    peers = {"bank": ids["bank"].cert_path, "retailer": ids["retailer"].cert_path}
    with pytest.raises(ConfigError, match="exactly one peer"):
        open_channels("insurer", role="dial", address=("127.0.0.1", 1), own_cert=own.cert_path,
                      own_key=own.key_path, peers=peers)
    with pytest.raises(ConfigError, match="role must be"):
        open_channels("insurer", role="serve", address=("127.0.0.1", 1), own_cert=own.cert_path,  # type: ignore[arg-type]
                      own_key=own.key_path, peers=peers)


# -- rejections: the honest side says why ---------------------------------------------------------------------------


def test_partner_rejected_with_unknown_certificate(ids, tmp_path, pool):
    hub = hub_for(ids)
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    impostor = make_identities(tmp_path / "impostor", ["insurer"])["insurer"]  # right name, wrong key
    creds = Credentials.load("insurer", own_cert=impostor.cert_path, own_key=impostor.key_path,
                             peers={"bank": ids["bank"].cert_path})
    with pytest.raises(AuthenticationError, match="rejected this party"):
        dial(creds, peer="bank", address=hub.address, deadline_s=5, options=FAST)
    with pytest.raises(AuthenticationError, match="unknown certificate"):
        accepted.result(timeout=5)
    hub.close()


def test_partner_rejected_with_certificate_pinned_to_another_party(ids, pool):
    hub = hub_for(ids, partners=("insurer", "retailer"))
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    # The insurer, with its own valid key, tries to speak as the retailer (a modified client skips load()'s checks).
    forged = Credentials(party="retailer", cert_path=ids["insurer"].cert_path, key_path=ids["insurer"].key_path,
                         pins={"bank": credentials("insurer", ids, ["bank"]).pins["bank"]})
    with pytest.raises(AuthenticationError, match="refused this party 'retailer'"):
        dial(forged, peer="bank", address=hub.address, deadline_s=5, options=FAST)
    expected = "claims to be 'retailer' but presents the certificate pinned to party 'insurer'"
    with pytest.raises(AuthenticationError, match=expected):
        accepted.result(timeout=5)
    hub.close()


def test_partner_rejected_with_expired_certificate(ids, tmp_path, pool):
    short = short_lived_identity(tmp_path / "short", "insurer", seconds=1.5)
    hub = Listener(
        Credentials.load("bank", own_cert=ids["bank"].cert_path, own_key=ids["bank"].key_path,
                         peers={"insurer": short.cert_path}),
        address=("127.0.0.1", 0), options=FAST,
    )  # pinned while still valid: the certificate expires during the run
    partner = Credentials.load("insurer", own_cert=short.cert_path, own_key=short.key_path,
                               peers={"bank": ids["bank"].cert_path})
    time.sleep(max(0.0, (short.not_after.timestamp() - time.time())) + 1.1)
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    with pytest.raises(AuthenticationError, match="rejected this party's certificate as expired"):
        dial(partner, peer="bank", address=hub.address, deadline_s=5, options=FAST)
    with pytest.raises(AuthenticationError, match=r"presented an expired certificate.*vsplit keys new"):
        accepted.result(timeout=5)
    hub.close()


def test_expired_pinned_certificate_refused_before_listening(ids, tmp_path):
    old = short_lived_identity(tmp_path / "old", "insurer", seconds=-30)
    expected = r"peer 'insurer' certificate expired on .*`vsplit keys new --party insurer --force`"
    with pytest.raises(AuthenticationError, match=expected):
        Credentials.load("bank", own_cert=ids["bank"].cert_path, own_key=ids["bank"].key_path,
                         peers={"insurer": old.cert_path})


def test_partner_rejected_as_plaintext_client(ids, pool, monkeypatch):
    hub = hub_for(ids)
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    monkeypatch.setenv(ALLOW_ENV, "1")
    with pytest.warns(InsecureTransportWarning):
        plain = insecure_plaintext_channel_for_tests(socket.create_connection(hub.address), peer="bank", options=FAST)
    plain.send(b"VS" + b"\x00" * 60)  # a vsplit frame without TLS
    with pytest.raises(AuthenticationError, match="did not start a TLS handshake: a plaintext client"):
        accepted.result(timeout=5)
    with pytest.raises(TransportError):
        plain.recv(timeout=5)
    plain.close()
    hub.close()


def test_partner_rejected_without_a_certificate(ids, pool):
    hub = hub_for(ids)
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    client = RawTlsClient(hub.address, cert=None, key=None, trust=ids["bank"].cert_path, claim="insurer")
    with pytest.raises(AuthenticationError, match="presented no certificate"):
        accepted.result(timeout=5)
    assert client.read_frame() is None  # the hub said nothing but a TLS alert
    client.close()
    hub.close()


def test_hub_rejected_when_it_presents_another_certificate(ids, tmp_path, pool):
    fake = make_identities(tmp_path / "fake", ["bank"])
    hub = Listener(
        Credentials.load("bank", own_cert=fake["bank"].cert_path, own_key=fake["bank"].key_path,
                         peers={"insurer": ids["insurer"].cert_path}),
        address=("127.0.0.1", 0), options=FAST,
    )
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    expected = r"'bank' at 127\.0\.0\.1:\d+ presented a certificate that is not pinned"
    with pytest.raises(AuthenticationError, match=expected):
        partner_dial(ids, "insurer", hub.address)
    with pytest.raises(AuthenticationError, match="rejected this party's certificate"):
        accepted.result(timeout=5)
    hub.close()


def test_listener_skips_a_refused_connection_and_still_accepts_the_partner(ids, tmp_path, pool):
    hub = hub_for(ids)
    accepted = pool.submit(hub.accept_all, deadline_s=10)
    stranger = make_identities(tmp_path / "stranger", ["insurer"])["insurer"]
    with pytest.raises(AuthenticationError):
        dial(Credentials.load("insurer", own_cert=stranger.cert_path, own_key=stranger.key_path,
                              peers={"bank": ids["bank"].cert_path}), peer="bank", address=hub.address, options=FAST)
    partner = partner_dial(ids, "insurer", hub.address)
    channels = accepted.result(timeout=10)
    assert list(channels) == ["insurer"]
    assert len(hub.rejections) == 1 and "unknown certificate" in str(hub.rejections[0])
    close_all(partner, *channels.values())


def test_listener_reports_refusals_when_the_partner_never_arrives(ids, tmp_path, pool):
    hub = hub_for(ids)
    accepted = pool.submit(hub.accept_all, deadline_s=1.5)
    stranger = make_identities(tmp_path / "stranger", ["insurer"])["insurer"]
    with pytest.raises(AuthenticationError):
        dial(Credentials.load("insurer", own_cert=stranger.cert_path, own_key=stranger.key_path,
                              peers={"bank": ids["bank"].cert_path}), peer="bank", address=hub.address, options=FAST)
    with pytest.raises(AuthenticationError, match=r"partners \['insurer'\] did not connect.*unknown certificate"):
        accepted.result(timeout=5)


def test_second_connection_for_a_connected_partner_refused(ids, pool):
    hub = hub_for(ids)
    first = pool.submit(hub.accept_one, timeout_s=5)
    partner = partner_dial(ids, "insurer", hub.address)
    channel = first.result(timeout=5)
    second = pool.submit(hub.accept_one, timeout_s=5, taken=frozenset({"insurer"}))
    with pytest.raises(AuthenticationError, match="refused this party"):
        partner_dial(ids, "insurer", hub.address)
    with pytest.raises(AuthenticationError, match="already connected"):
        second.result(timeout=5)
    close_all(partner, channel)
    hub.close()


def test_configuration_mistakes_named_before_connecting(ids, tmp_path):
    bank, insurer = ids["bank"], ids["insurer"]
    with pytest.raises(ConfigError, match="is the certificate of 'insurer', not of 'bank'"):
        Credentials.load("bank", own_cert=insurer.cert_path, own_key=insurer.key_path, peers={"x": bank.cert_path})
    with pytest.raises(ConfigError, match=r"not found at .*vsplit keys new"):
        Credentials.load("bank", own_cert=bank.cert_path, own_key=bank.key_path,
                         peers={"insurer": tmp_path / "nope.pem"})
    with pytest.raises(ConfigError, match="does not belong to certificate"):
        Credentials.load("bank", own_cert=bank.cert_path, own_key=insurer.key_path,
                         peers={"insurer": insurer.cert_path}).context(server_side=True)
    insurer.key_path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"readable by other users.*chmod 600"):
        Credentials.load("insurer", own_cert=insurer.cert_path, own_key=insurer.key_path,
                         peers={"bank": bank.cert_path})


# -- channel life ----------------------------------------------------------------------------------------------------


def connected_pair(ids, pool, options=FAST):
    hub = hub_for(ids, options=options)
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    partner = partner_dial(ids, "insurer", hub.address, options=options)
    channel = accepted.result(timeout=5)
    hub.close()
    return channel, partner


def test_heartbeats_keep_an_idle_channel_alive(ids, pool):
    hub_side, partner = connected_pair(ids, pool, options=FAST.__class__(heartbeat_s=0.05, idle_timeout_s=0.3))
    time.sleep(0.8)  # well past the idle timeout: only heartbeats flow
    with pytest.raises(NothingYet):
        hub_side.recv(timeout=0)
    assert hub_side.wire_stats.heartbeats_received >= 3 and partner.wire_stats.heartbeats_sent >= 3
    partner.send(b"still here")
    assert bytes(hub_side.recv(timeout=2)) == b"still here"
    close_all(hub_side, partner)


def test_dead_peer_detected_by_the_read_timeout(ids, pool):
    hub = hub_for(ids, options=FAST.__class__(heartbeat_s=0.05, idle_timeout_s=0.3))
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    silent = RawTlsClient(hub.address, cert=ids["insurer"].cert_path, key=ids["insurer"].key_path,
                          trust=ids["bank"].cert_path, claim="insurer")  # never sends a heartbeat
    assert silent.read_hello() == ("bank", "insurer", True)
    channel = accepted.result(timeout=5)
    started = time.monotonic()
    with pytest.raises(TransportError, match="not even a heartbeat: the peer is down"):
        channel.recv(timeout=5)
    assert time.monotonic() - started < 2
    close_all(channel)
    silent.close()
    hub.close()


def test_clean_close_delivers_the_last_frames_first(ids, pool):
    hub_side, partner = connected_pair(ids, pool)
    for i in range(3):
        partner.send(b"frame %d" % i)
    partner.close()
    assert [bytes(hub_side.recv(timeout=2)) for _ in range(3)] == [b"frame 0", b"frame 1", b"frame 2"]
    with pytest.raises(TransportError, match="'insurer' closed the channel"):
        hub_side.recv(timeout=2)
    with pytest.raises(TransportError, match="closed"):
        partner.send(b"late")
    close_all(hub_side)


def test_dropped_connection_reported_as_such(ids, pool):
    hub = hub_for(ids)
    accepted = pool.submit(hub.accept_one, timeout_s=5)
    client = RawTlsClient(hub.address, cert=ids["insurer"].cert_path, key=ids["insurer"].key_path,
                          trust=ids["bank"].cert_path, claim="insurer")
    client.read_hello()
    channel = accepted.result(timeout=5)
    client.sock.shutdown(socket.SHUT_RDWR)  # TCP goes away without a TLS close_notify
    with pytest.raises(TransportError, match="dropped without a TLS close"):
        channel.recv(timeout=5)
    close_all(channel)
    client.close()
    hub.close()


def test_recv_polls_and_times_out(ids, pool):
    hub_side, partner = connected_pair(ids, pool)
    with pytest.raises(NothingYet):
        hub_side.recv(timeout=0)
    with pytest.raises(TransportError, match=r"no frame from 'insurer' within 0\.1 s"):
        hub_side.recv(timeout=0.1)
    close_all(hub_side, partner)


def test_sender_refuses_frames_over_the_cap_and_empty_frames(ids, pool):
    hub_side, partner = connected_pair(ids, pool, options=FAST.__class__(max_frame=1000))
    with pytest.raises(TransportError, match="over the 1000-byte cap"):
        partner.send(b"x" * 1001)
    with pytest.raises(TransportError, match="empty frame"):
        partner.send(b"")
    partner.send(b"x" * 1000)
    assert len(hub_side.recv(timeout=2)) == 1000
    close_all(hub_side, partner)


def test_plaintext_channel_refuses_to_run_without_the_test_flag(monkeypatch):
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    a, b = socket.socketpair()
    with pytest.raises(ConfigError, match="for tests only"):
        insecure_plaintext_channel_for_tests(a, peer="bank")
    a.close()
    b.close()


def test_flooding_peer_is_held_back_instead_of_buffered_without_bound(ids, pool):
    hub_side, partner = connected_pair(ids, pool, options=FAST.__class__(max_buffered=16 * 1024))
    frames = [bytes([i]) * 4096 for i in range(200)]  # 800 KiB that the hub does not read yet
    sending = pool.submit(lambda: [partner.send(f) for f in frames])
    time.sleep(0.3)
    assert hub_side.queued_bytes <= 16 * 1024 + 4096
    assert [bytes(hub_side.recv(timeout=5)) for _ in frames] == frames  # held back, nothing lost
    sending.result(timeout=5)
    close_all(hub_side, partner)
