"""The vertical scorecard's machines over memory channels: the coefficients equal the pooled run's, the label party
sends no label, residual or per-row value in the clear, and malformed input fails with a clear error naming the party.

A 1024-bit OU key behind the test-only flag, made once; 240 rows, a bank and two partners.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests._scorecard_support import PARAMS, parties
from vsplit.errors import ConfigError, DataError, ProtocolError
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.scorecard import (
    LabelPoints,
    LabelScorecard,
    PartnerPointsMachine,
    PartnerScorecard,
    PointsTable,
    Scaling,
    ScorecardParams,
    WoeColumns,
    fit_pooled,
    sigmoid,
)
from vsplit.scorecard.messages import (
    LinearScores,
    MaskedGradient,
    PartnerCard,
    Residuals,
    ScoreHello,
    ScoreReady,
    Unmasked,
)

pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")
PARTNERS = ("shop", "telco")


@pytest.fixture(scope="module")
def keys():
    pytest.importorskip("heu")
    from vsplit.he import generate_keypair

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)


def _machines(keys, labels, cols, params=PARAMS):
    machines = {"bank": LabelScorecard(cols["bank"].matrix(), labels=labels, partners=PARTNERS, params=params,
                                       keys=keys)}
    for p in PARTNERS:
        machines[p] = PartnerScorecard(cols[p], label="bank", min_key_bits=1024, insecure_small_key_for_tests=True,
                                       share_names=p == "shop", share_points=p == "shop")
    return machines


@pytest.fixture(scope="module")
def trained(keys):
    """One split run with every frame tapped."""
    labels, cols = parties()
    frames: list[tuple[str, str, object, bytes]] = []
    pumps = connect(["bank", *PARTNERS], session=b"s" * 16,
                    taps=[lambda s, r, m, f: frames.append((s, r, m, bytes(f)))])
    machines = _machines(keys, labels, cols)
    results = run_machines(pumps, machines)
    return labels, cols, results, frames, machines


def test_split_coefficients_equal_the_pooled_run(trained):
    labels, cols, results, *_ = trained
    pooled = np.hstack([cols[p].matrix() for p in ("bank", *PARTNERS)])
    coef, intercept = fit_pooled(pooled, labels, params=PARAMS)
    bank_coef, bank_intercept = results["bank"]
    split = np.concatenate([bank_coef, results["shop"], results["telco"]])
    assert np.abs(split - coef).max() < 1e-6
    assert abs(bank_intercept - intercept) < 1e-6
    assert np.abs(coef).min() > 1e-3  # the steps moved every coefficient: the comparison is not of zeros


def test_label_party_sends_no_label_residual_or_row_value_in_the_clear(trained):
    labels, cols, results, frames, _ = trained
    sent = [(m, f) for s, _, m, f in frames if s == "bank"]
    assert {type(m) for m, _ in sent} == {ScoreHello, Residuals, Unmasked}
    assert all(len(m.values) == 2 for m, _ in sent if isinstance(m, Unmasked))  # per attribute, not per row
    label_bytes = labels.astype(np.float64).tobytes()
    pooled = np.hstack([cols[p].matrix() for p in ("bank", *PARTNERS)])
    bank_coef, b = results["bank"]
    residual = sigmoid(pooled @ np.concatenate([bank_coef, results["shop"], results["telco"]]) + b) - labels
    for _, frame in sent:
        for needle in (label_bytes[:64], labels.astype(np.uint8).tobytes()[:32], residual.tobytes()[:64],
                       np.rint(residual * PARAMS.residual_scale).astype(np.int64).tobytes()[:64]):
            assert needle not in frame
    assert {type(m) for s, _, m, _ in frames if s != "bank"} == {ScoreReady, LinearScores, MaskedGradient, PartnerCard}


def test_partner_returning_malformed_ciphertexts_is_named(keys):
    labels, cols = parties()
    machines = _machines(keys, labels, cols)
    bank, shop = machines["bank"], machines["shop"]
    (hello, _) = bank.start()
    ready, scores = shop.receive("bank", hello.message)
    for p in ("telco",):
        r, s = machines[p].receive("bank", hello.message)
        bank.receive(p, r.message)
        bank.receive(p, s.message)
    bank.receive("shop", ready.message)
    residuals = bank.receive("shop", scores.message)
    (answer,) = shop.receive("bank", residuals[0].message)
    frame = answer.message.frame.copy()
    frame[-keys.public.width:] = 0xFF  # a ciphertext beyond the key's modulus
    with pytest.raises(ProtocolError, match=r"partner 'shop' sent a malformed masked gradient.*modulus"):
        bank.receive("shop", MaskedGradient(step=0, frame=frame))
    short = answer.message.frame[:-3]
    with pytest.raises(ProtocolError, match=r"partner 'shop'.*bytes"):
        bank.receive("shop", MaskedGradient(step=0, frame=short))
    tampered = answer.message.frame.copy()
    tampered[-keys.public.width // 2] ^= 1  # a valid ciphertext of garbage: decrypts to a number far too wide
    with pytest.raises(ProtocolError, match=r"partner 'shop'"):
        bank.receive("shop", MaskedGradient(step=0, frame=tampered))


def test_bad_inputs_get_clear_errors():
    with pytest.raises(DataError, match=r"attribute 'x' has a bin code outside 0..1"):
        WoeColumns(names=("x",), woe=(np.zeros(2),), codes=np.array([[2]]))
    with pytest.raises(DataError, match=r"attribute 'x' has a WOE value not finite"):
        WoeColumns(names=("x",), woe=(np.array([np.inf, 0.0]),), codes=np.array([[0]]))
    with pytest.raises(DataError, match=r"one class only"):
        fit_pooled(np.zeros((3, 1)), np.ones(3), params=PARAMS)
    with pytest.raises(ConfigError, match=r"scorecard.learning_rate"):
        ScorecardParams(learning_rate=0)
    with pytest.raises(ConfigError, match=r"scorecard.pdo"):
        Scaling(pdo=-1)


def test_points_add_up_to_the_model_log_odds_and_reasons_respect_names(trained):
    _, cols, results, *_ = trained
    scaling = Scaling(base_score=600, base_odds=50, pdo=20)
    bank_coef, b = results["bank"]
    tables = {"bank": PointsTable.of(names=cols["bank"].names, labels=cols["bank"].labels, woe=cols["bank"].woe,
                                     coef=bank_coef, scaling=scaling)}
    for p in PARTNERS:
        tables[p] = PointsTable.of(names=cols[p].names, labels=cols[p].labels, woe=cols[p].woe, coef=results[p],
                                   scaling=scaling)
    machines = {"bank": LabelPoints(tables["bank"], own_codes=cols["bank"].codes, base_points=scaling.base_points(b),
                                    partners=PARTNERS, reasons=3)}
    machines["shop"] = PartnerPointsMachine(tables["shop"], codes=cols["shop"].codes, share_names=True)
    machines["telco"] = PartnerPointsMachine(tables["telco"], codes=cols["telco"].codes, share_names=False)
    scored = run_machines(connect(["bank", *PARTNERS], session=b"p" * 16), machines)["bank"]
    z = sum(cols[p].matrix() @ c for p, c in (("bank", bank_coef), ("shop", results["shop"]),
                                              ("telco", results["telco"]))) + b
    assert np.allclose(scaling.log_odds(scored.score), z)
    names = {(party, attr) for row in scored.reasons for party, attr, _ in row}
    assert {a for p, a in names if p == "shop"} <= set(cols["shop"].names)
    assert {a for p, a in names if p == "telco"} <= {"#0", "#1"} and any(p == "telco" for p, _ in names)
    row = 0
    lost = {(p, a): c for p, a, c in scored.reasons[row]}
    assert list(lost.values()) == sorted(lost.values(), reverse=True) and all(c > 0 for c in lost.values())


def test_model_card_shows_only_what_each_partner_shares(trained):
    _, cols, _, _, machines = trained
    cards = machines["bank"].cards
    assert cards["telco"] == {"attributes": 2, "names": None, "points": None}
    assert cards["shop"]["names"] == list(cols["shop"].names)
    shop_points = machines["shop"].points_table()
    assert cards["shop"]["points"] == [[n, lab, round(p, 6)] for n, lab, p in shop_points.rows()]
