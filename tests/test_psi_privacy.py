"""What crosses the wire in PSI: never a raw ID or an unsalted hash of one, and only what each reveal mode allows."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from vsplit.psi import PsiConfig, curve
from vsplit.psi.handshake import session_salt
from vsplit.psi.ids import IdPolicy
from vsplit.psi.messages import Ack, Blinded, Doubled, Hello, Selected
from vsplit.runtime.psi import align_in_process

BANK = [f"customer-{i:05d}@bank.example" for i in range(0, 60)]
SHOP = [f"customer-{i:05d}@bank.example" for i in range(30, 90)]
TELCO = [f"customer-{i:05d}@bank.example" for i in range(45, 120)]


def forbidden_forms(value: str) -> list[bytes]:
    """Every encoding of ``value`` an eavesdropper could match without the session's secrets."""
    raw = value.encode()
    out = [raw, value.encode("utf-16-le")]
    for algo in (hashlib.sha256, hashlib.sha512):
        digest = algo(raw).digest()
        out += [digest, digest[:32], digest.hex().encode(), algo(raw).hexdigest().upper().encode()]
    return out


class Recorder:
    def __init__(self) -> None:
        self.frames: list[tuple[str, str, object, bytes]] = []

    def __call__(self, sender: str, to: str, msg: object, frame: bytes) -> None:
        self.frames.append((sender, to, msg, bytes(frame)))

    def kinds(self, sender: str) -> set[str]:
        return {type(m).__name__ for s, _, m, _ in self.frames if s == sender}


@pytest.mark.parametrize("reveal", ["both", "label_party"])
@pytest.mark.parametrize("parties", [2, 3])
@pytest.mark.parametrize("buckets", [1, 4])
def test_no_raw_id_or_unsalted_hash_in_any_frame(reveal: str, parties: int, buckets: int) -> None:
    tables = {"bank": BANK, "shop": SHOP, "telco": TELCO}
    tables = dict(list(tables.items())[:parties])
    tap = Recorder()
    config = PsiConfig(reveal=reveal, buckets=buckets)
    out = align_in_process(tables, label_party="bank", config=config, taps=[tap])
    assert out["bank"].size == (30 if parties == 2 else 15)
    wire = b"".join(frame for *_, frame in tap.frames)
    everyone = {v for ids in tables.values() for v in ids}
    for value in everyone:
        for form in forbidden_forms(value):
            assert form not in wire, f"{value!r} leaked"
    # Not even the salted hashes travel: only blinded values do.
    hellos = {(s, to): m for s, to, m, _ in tap.frames if isinstance(m, Hello)}
    for partner in list(tables)[1:]:
        salt = session_salt(label_hello=hellos["bank", partner], partner_hello=hellos[partner, "bank"])
        for row in curve.hash_to_u([v.encode() for v in everyone], salt=salt, label=PsiConfig().label):
            assert row.tobytes() not in wire


def test_values_from_two_sessions_over_the_same_ids_never_repeat() -> None:
    ids = [f"c{i}" for i in range(64)]
    sent = []
    for _ in range(2):
        tap = Recorder()
        align_in_process({"bank": ids, "shop": ids}, label_party="bank", taps=[tap])
        sent.append({bytes(p) for *_, m, _ in tap.frames if isinstance(m, (Blinded, Doubled)) for p in m.points})
    assert not sent[0] & sent[1]  # fresh scalars and salts: sessions cannot be linked


def test_each_party_sends_in_a_fresh_random_order() -> None:
    from vsplit.data.id_sources import as_source
    from vsplit.psi.prepare import prepare_ids

    def sent_order(buckets: int) -> list[int]:
        ready = prepare_ids(as_source([f"c{i}" for i in range(200)]), policy=IdPolicy(), salt=bytes(32), label=b"L",
                            buckets=buckets)
        return [row for k in range(buckets) for row in ready.bucket(k)[0].tolist() if row >= 0]

    for buckets in (1, 3):
        first = sent_order(buckets)
        assert sorted(first) == list(range(200))
        assert first != sorted(first) if buckets == 1 else all(first[i:i + 20] != sorted(first[i:i + 20])
                                                                  for i in (0, 100))
        assert sent_order(buckets) != first  # not predictable: a fresh seed each time


def test_under_label_party_reveal_the_partner_never_receives_its_double_blinded_values() -> None:
    tap = Recorder()
    out = align_in_process(
        {"bank": BANK, "shop": SHOP}, label_party="bank", config=PsiConfig(reveal="label_party"), taps=[tap]
    )
    assert tap.kinds("bank") == {"Hello", "Blinded", "Ack", "Selected"}
    assert tap.kinds("shop") == {"Hello", "Blinded", "Doubled"}
    selected = np.concatenate([m.positions for s, _, m, _ in tap.frames if isinstance(m, Selected)])
    assert selected.dtype == np.int64 and len(selected) == out["shop"].size == 30  # positions, not IDs


def test_under_both_reveal_both_sides_return_double_blinded_values_and_nothing_else() -> None:
    tap = Recorder()
    align_in_process({"bank": BANK, "shop": SHOP}, label_party="bank", taps=[tap])
    assert tap.kinds("bank") == tap.kinds("shop") == {"Hello", "Blinded", "Doubled"}
    kinds = {type(m) for *_, m, _ in tap.frames}
    assert Ack not in kinds and Selected not in kinds
    assert all(len(m.points) <= PsiConfig().chunk for *_, m, _ in tap.frames if isinstance(m, Blinded))
