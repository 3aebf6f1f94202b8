"""The PSI machines driven directly: flow control, a misbehaving peer, the process backend, the public API."""

from __future__ import annotations

import numpy as np
import pytest

import vsplit.psi
from vsplit.errors import ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.psi import LabelParty, Partner, ProcessBackend, PsiConfig, curve
from vsplit.psi.messages import Ack, Blinded, Doubled, Selected
from vsplit.runtime.psi import align_in_process


def handshake(config: PsiConfig, bank_ids: list, shop_ids: list) -> tuple[LabelParty, Partner, list, list]:
    """Both machines past the Hellos; returns them and what each sent in answer to the other's Hello."""
    bank = LabelParty(bank_ids, partners=["shop"], config=config)
    shop = Partner(shop_ids, label_party="bank", config=config)
    (bank_hello,), (shop_hello,) = bank.start(), shop.start()
    return bank, shop, bank.receive("shop", shop_hello.message), shop.receive("bank", bank_hello.message)


def test_a_party_streams_at_most_window_chunks_ahead_of_the_answers() -> None:
    config = PsiConfig(chunk=2, window=3)
    bank, shop, bank_out, _ = handshake(config, [f"b{i}" for i in range(20)], ["b1"])
    assert [type(o.message) for o in bank_out] == [Blinded] * 3  # 10 chunks to send, 3 in flight
    assert [o.message.index for o in bank_out] == [0, 1, 2]
    answers = shop.receive("bank", bank_out[0].message)
    assert [type(o.message) for o in answers] == [Doubled]
    more = bank.receive("shop", answers[0].message)
    assert [(type(o.message), o.message.index) for o in more] == [(Blinded, 3)]  # one answer, one more chunk


def test_chunks_out_of_order_are_a_protocol_violation() -> None:
    _, shop, bank_out, _ = handshake(PsiConfig(chunk=2), ["a", "b", "c", "d"], ["a"])
    with pytest.raises(ProtocolError, match="out of order") as caught:
        shop.receive("bank", bank_out[1].message)
    assert caught.value.code == AbortCode.PROTOCOL_VIOLATION


def test_a_low_order_point_from_the_peer_is_refused() -> None:
    _, shop, _, _ = handshake(PsiConfig(), ["a"], ["a"])
    crafted = np.frombuffer(curve.LOW_ORDER[5], np.uint8).reshape(1, 32).copy()
    with pytest.raises(ProtocolError, match="small order") as caught:
        shop.receive("bank", Blinded(index=0, total=1, points=crafted))
    assert caught.value.code == AbortCode.PROTOCOL_VIOLATION


def test_a_peer_that_announces_fewer_points_than_it_sends_is_refused() -> None:
    _, shop, _, _ = handshake(PsiConfig(), ["a"], ["a"])
    with pytest.raises(ProtocolError, match="does not fit"):
        shop.receive("bank", Blinded(index=0, total=1, points=np.full((2, 32), 9, np.uint8)))


def test_a_label_party_that_withholds_values_under_both_reveal_is_refused() -> None:
    _, shop, _, _ = handshake(PsiConfig(), ["a"], ["a"])
    with pytest.raises(ProtocolError, match="withheld"):
        shop.receive("bank", Ack(index=0))


def test_messages_from_strangers_are_refused() -> None:
    bank = LabelParty(["a"], partners=["shop"])
    shop = Partner(["a"], label_party="bank")
    with pytest.raises(ProtocolError, match="not a partner"):
        bank.receive("mallory", shop.start()[0].message)
    with pytest.raises(ProtocolError, match="only the label party"):
        shop.receive("mallory", bank.start()[0].message)


def test_selection_outside_the_partners_own_overlap_is_refused() -> None:
    config = PsiConfig(chunk=8)
    bank = LabelParty(["a", "b", "c"], partners=["shop", "telco"], config=config)
    shop = Partner(["a", "x", "y"], label_party="bank", config=config)
    telco = Partner(["a", "b"], label_party="bank", config=config)
    queue: list[tuple[str, Outgoing]] = [("bank", o) for o in bank.start()]
    queue += [("shop", o) for o in shop.start()] + [("telco", o) for o in telco.start()]
    machines = {"bank": bank, "shop": shop, "telco": telco}
    while queue:
        sender, out = queue.pop(0)
        if isinstance(out.message, Selected) and out.to == "shop":  # tamper: select everything the shop sent
            out = Outgoing("shop", Selected(index=0, total=3, positions=np.arange(3, dtype=np.int64)))
            with pytest.raises(ProtocolError, match="outside the overlap"):
                shop.receive(sender, out.message)
            return
        queue += [(out.to, o) for o in machines[out.to].receive(sender, out.message)]
    pytest.fail("no Selected was sent to the shop")


def test_process_backend_gives_the_same_alignment_as_computing_in_process() -> None:
    bank = [f"id{i}" for i in range(300)]
    shop = [f"id{i}" for i in range(150, 500)]
    with ProcessBackend(workers=2, min_split=16) as backend:
        fast = align_in_process({"bank": bank, "shop": shop}, label_party="bank", backend=backend)
    plain = align_in_process({"bank": bank, "shop": shop}, label_party="bank")
    assert sorted(fast["bank"].ids) == sorted(plain["bank"].ids) == sorted(bank[150:])
    assert fast["bank"].ids == fast["shop"].ids


def test_stats_count_sizes_points_and_bytes() -> None:
    out = align_in_process({"bank": ["a", "b", "c"], "shop": ["c", "d"]}, label_party="bank")
    stats = out["bank"].stats
    assert (stats.size, stats.peer_sizes, stats.intersection) == (3, {"shop": 2}, 1)
    assert (stats.points_sent, stats.points_received) == (3 + 2, 2 + 3)
    assert stats.bytes_sent > 32 * stats.points_sent and stats.seconds > 0


def test_public_api_is_pinned() -> None:
    assert sorted(vsplit.psi.__all__) == [
        "Alignment",
        "Backend",
        "CsvIds",
        "IdPolicy",
        "IdSource",
        "LabelParty",
        "PSI_VERSION",
        "ParquetIds",
        "Partner",
        "ProcessBackend",
        "PsiConfig",
        "PsiStats",
        "SequenceIds",
        "SerialBackend",
        "normalise_id",
        "psi_machines",
    ]
