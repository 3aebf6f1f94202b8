"""The PSI handshake refuses parties that run another version, session, label, reveal mode or normalisation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vsplit.errors import ProtocolError, RemoteAbort
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.psi import PSI_VERSION, IdPolicy, LabelParty, Partner, PsiConfig
from vsplit.runtime.inprocess import connect, run_machines


def run_pair(bank: LabelParty, shop: Partner) -> tuple[ProtocolError, list[int]]:
    """Run until the first side refuses; return its error and the abort codes sent."""
    codes: list[int] = []
    tap = lambda sender, to, msg, frame: codes.append(msg.code) if isinstance(msg, Abort) else None  # noqa: E731
    pumps = connect(["bank", "shop"], session=b"s" * 16, taps=[tap])
    with pytest.raises(ProtocolError) as caught:
        run_machines(pumps, {"bank": bank, "shop": shop})
    assert not isinstance(caught.value, RemoteAbort)  # the side that noticed raises its own, detailed error
    return caught.value, codes


def test_partner_with_another_protocol_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bank = LabelParty(["a"], partners=["shop"])
    monkeypatch.setattr("vsplit.psi.handshake.PSI_VERSION", PSI_VERSION + 1)
    shop = Partner(["a"], label_party="bank")
    error, codes = run_pair(bank, shop)
    assert error.code == AbortCode.VERSION_MISMATCH
    assert f"version {PSI_VERSION + 1}, this side runs {PSI_VERSION}" in str(error)
    assert "same vsplit version" in str(error)
    assert codes == [AbortCode.VERSION_MISMATCH]


@pytest.mark.parametrize(
    "other",
    [PsiConfig(context="run-8"), PsiConfig(context="run-7", label=b"vsplit-psi-test")],
    ids=["different-run-context", "different-label"],
)
def test_partner_configured_for_another_session_salt_is_refused(other: PsiConfig) -> None:
    bank = LabelParty(["a"], partners=["shop"], config=PsiConfig(context="run-7"))
    error, codes = run_pair(bank, Partner(["a"], label_party="bank", config=other))
    assert error.code == AbortCode.SESSION_MISMATCH
    assert "another PSI session" in str(error) and "PsiConfig(context=..., label=...)" in str(error)
    assert codes == [AbortCode.SESSION_MISMATCH]


def test_partner_with_another_reveal_mode_is_refused() -> None:
    bank = LabelParty(["a"], partners=["shop"], config=PsiConfig(reveal="label_party"))
    error, _ = run_pair(bank, Partner(["a"], label_party="bank"))
    assert error.code == AbortCode.CONFIG_MISMATCH and "reveal='both'" in str(error)


def test_partner_that_normalises_differently_is_refused() -> None:
    bank = LabelParty(["a"], partners=["shop"])
    error, _ = run_pair(bank, Partner(["A"], label_party="bank", policy=IdPolicy(casefold=True)))
    assert error.code == AbortCode.CONFIG_MISMATCH and "casefold" in str(error)


def test_two_label_parties_are_refused() -> None:
    a, b = LabelParty(["a"], partners=["shop"]), LabelParty(["a"], partners=["bank"])
    pumps = connect(["bank", "shop"], session=b"s" * 16)
    with pytest.raises(ProtocolError, match="both sides are configured as the label party") as caught:
        run_machines(pumps, {"bank": a, "shop": b})
    assert caught.value.code == AbortCode.CONFIG_MISMATCH


def test_partner_expecting_another_party_count_is_refused() -> None:
    bank = LabelParty(["a"], partners=["shop"])
    error, _ = run_pair(bank, Partner(["a"], label_party="bank", parties=3))
    assert error.code == AbortCode.CONFIG_MISMATCH and "expects 3 parties" in str(error)


def test_a_hello_from_a_newer_version_is_refused_when_fed_directly() -> None:
    bank = LabelParty(["a"], partners=["shop"])
    (hello,) = [out.message for out in bank.start()]
    newer = dataclasses.replace(hello, version=99, role="partner", nonce=np.ones(32, np.uint8))
    with pytest.raises(ProtocolError, match="version 99") as caught:
        bank.receive("shop", newer)
    assert caught.value.code == AbortCode.VERSION_MISMATCH
