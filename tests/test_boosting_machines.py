"""The boosting machines driven directly, message by message: bins, the refusal of a malformed, oversized or foreign
ciphertext message, of a key below the minimum, and of messages out of step or out of range.

A 1024-bit OU key behind the test-only flag, made once; tables of a few dozen rows.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from vsplit.boosting import BoostParams, LabelBoost, LabelPredict, PartnerBoost, fit_bins, fit_pooled
from vsplit.boosting.messages import Assigned, BoostHello, BoostReady, Decisions, Gradients, Histograms, Level, Record
from vsplit.errors import ConfigError, ProtocolError
from vsplit.he import MAX_MESSAGE_BYTES

pytestmark = pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning")
PARAMS = BoostParams(trees=2, max_depth=2, min_child_weight=0.1)
ROWS = 60


@pytest.fixture(scope="module")
def keys():
    pytest.importorskip("heu")
    from vsplit.he import generate_keypair

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    bank, shop = rng.normal(size=(ROWS, 2)), rng.normal(size=(ROWS, 2))
    labels = (bank[:, 0] + shop[:, 1] + rng.normal(scale=0.5, size=ROWS) > 0).astype(float)
    return labels, fit_bins(bank, max_bins=4).transform(bank), fit_bins(shop, max_bins=4).transform(shop)


def _label(keys):
    labels, bank, _ = _data()
    return LabelBoost(bank, width=5, labels=labels, partners=["shop"], params=PARAMS, keys=keys)


def _partner(**accept):
    _, _, shop = _data()
    accept = accept or {"min_key_bits": 1024, "insecure_small_key_for_tests": True}
    return PartnerBoost(shop, width=5, label="bank", **accept)


def _to_first_level(keys):
    """A label party and a partner after the hello and the first tree's gradients and root level."""
    label, partner = _label(keys), _partner()
    (hello,) = label.start()
    (ready,) = partner.receive("bank", hello.message)
    gradients, level = label.receive("shop", ready.message)
    assert partner.receive("bank", gradients.message) == []
    (histograms,) = partner.receive("bank", level.message)
    return label, partner, gradients.message, histograms.message


def test_bins_keep_missing_apart_and_cap_categories():
    table = np.column_stack([np.r_[np.arange(20.0), np.nan], np.r_[[5.0] * 10, [1.0] * 6, [2.0] * 2, [3.0, 4.0, 7.0]]])
    bins = fit_bins(table, categorical=(1,), max_bins=4)
    codes = bins.transform(table)
    assert codes[:, 0].max() == 4 and codes[-1, 0] == 4 and len(np.unique(codes[:-1, 0])) == 4
    assert set(codes[:10, 1]) == {2} and set(codes[10:16, 1]) == {0} and set(codes[16:18, 1]) == {1}
    assert set(codes[18:, 1]) == {3}  # the rarest categories share the last value bin
    assert bins.transform(np.array([[1e9, 42.0]])).tolist() == [[3, 3]]  # beyond the edges; never seen
    with pytest.raises(ConfigError, match="max_bins"):
        fit_bins(table, max_bins=1)


def test_pooled_tree_splits_a_clean_threshold():
    codes = np.repeat(np.arange(4), 10)[:, None]
    labels = (codes[:, 0] >= 2).astype(float)
    model = fit_pooled([codes], labels, widths=[5], params=BoostParams(trees=1, max_depth=1, min_child_weight=0))
    assert model.trees[0].splits[0].key() == (0, 0, 1, False)
    assert model.trees[0].leaves[1] < 0 < model.trees[0].leaves[2]


def test_oversized_ciphertext_message_refused_before_decoding():
    with pytest.raises(ProtocolError, match="not a ciphertext message"):
        Histograms(tree=0, depth=0, frame=np.zeros(MAX_MESSAGE_BYTES + 1, np.uint8))


def test_malformed_histograms_refused_by_the_label_party(keys):
    label, _, gradients, histograms = _to_first_level(keys)
    frame = histograms.frame
    with pytest.raises(ProtocolError, match="ciphertext message"):  # a count the protocol does not expect
        label.receive("shop", Histograms(tree=0, depth=0, frame=gradients.frame))
    truncated = frame[:-3]
    with pytest.raises(ProtocolError, match="bytes"):
        label.receive("shop", Histograms(tree=0, depth=0, frame=truncated))
    beyond = frame.copy()
    beyond[19 : 19 + keys.public.width] = 0xFF  # the first ciphertext above the modulus
    with pytest.raises(ProtocolError, match="not below the key's modulus"):
        label.receive("shop", Histograms(tree=0, depth=0, frame=beyond))
    (answer,) = label.receive("shop", histograms)  # the refused messages changed nothing: the genuine one is taken
    assert isinstance(answer.message, Record) or (isinstance(answer.message, Level) and answer.message.depth == 1)


def test_truncated_gradients_refused_by_the_partner(keys):
    label, partner = _label(keys), _partner()
    (hello,) = label.start()
    (ready,) = partner.receive("bank", hello.message)
    gradients, _ = label.receive("shop", ready.message)
    with pytest.raises(ProtocolError, match="ciphertext message"):
        partner.receive("bank", Gradients(tree=0, frame=gradients.message.frame[:-1]))


def test_key_below_the_minimum_refused(keys):
    (hello,) = _label(keys).start()
    with pytest.raises(ProtocolError, match="1024-bit ou key"):
        _partner(min_key_bits=2048).receive("bank", hello.message)
    labels, bank, _ = _data()
    with pytest.raises(ConfigError, match="under 2048 bits"):
        LabelBoost(bank, width=5, labels=labels, partners=["shop"], params=PARAMS, key_bits=1024)


def test_partner_refuses_messages_out_of_step_or_out_of_range(keys):
    label, partner, _, _ = _to_first_level(keys)
    with pytest.raises(ProtocolError, match="out of step"):
        partner.receive("bank", Level(tree=0, depth=2, nodes=np.full(ROWS, 3, np.int32)))
    with pytest.raises(ProtocolError, match="column or bin"):
        partner.receive("bank", Record(tree=0, depth=0, nodes=np.array([0], np.int32),
                                       columns=np.array([0], np.int32), bins=np.array([4], np.int32),
                                       missing_left=np.array([0], np.uint8)))
    with pytest.raises(ProtocolError, match="unexpected BoostHello"):
        partner.receive("bank", BoostHello(version=1, rows=ROWS, scale=2, slot_bits=8, key=np.ones(4, np.uint8)))
    with pytest.raises(ProtocolError, match="unexpected BoostReady"):
        label.receive("shop", BoostReady(columns=2, width=5))
    with pytest.raises(ProtocolError, match="node id outside depth"):
        Level(tree=0, depth=1, nodes=np.full(ROWS, 7, np.int32))
    with pytest.raises(ProtocolError, match="flag other than 0/1"):
        Assigned(tree=0, depth=0, records=np.array([0], np.int32), left=np.full(ROWS, 2, np.uint8))


def test_partner_refuses_a_node_under_its_minimum_size(keys):
    label, partner = _label(keys), _partner(min_key_bits=1024, insecure_small_key_for_tests=True, min_node_rows=5)
    (hello,) = label.start()
    gradients, _ = label.receive("shop", partner.receive("bank", hello.message)[0].message)
    partner.receive("bank", gradients.message)
    lonely = np.zeros(ROWS, np.int32)
    lonely[:3] = -1
    partner.receive("bank", Level(tree=0, depth=0, nodes=lonely))
    tiny = np.full(ROWS, 2, np.int32)
    tiny[0] = 1
    with pytest.raises(ProtocolError, match="min_node_rows"):
        partner.receive("bank", Level(tree=0, depth=1, nodes=tiny))


def test_prediction_refuses_decisions_of_the_wrong_shape():
    from vsplit.boosting import BoostModel, Split, Tree

    tree = Tree(splits={0: Split(party=1, column=0, bin=1, missing_left=False, record=0)}, leaves={1: -1.0, 2: 1.0})
    ask = LabelPredict(BoostModel(trees=(tree,), base=0.0, widths=(5, 5)), own_codes=np.zeros((3, 1), int),
                       partners=["shop"])
    ask.start()
    with pytest.raises(ProtocolError, match="bits of shape"):
        ask.receive("shop", Decisions(bits=np.zeros((3, 2), np.uint8)))
    ask.receive("shop", Decisions(bits=np.array([[1], [0], [1]], np.uint8)))
    assert ask.done and ask.result.round(3).tolist() == [0.269, 0.731, 0.269]


def test_histograms_leaving_two_cells_of_a_column_to_derive_refused(keys):
    label, _, _, histograms = _to_first_level(keys)
    cells = histograms.cells.copy()
    assert cells[4] == 0 and (cells[:5] == 2).sum() == 1  # no missing value in column 0; one cell left to derive
    cells[4] = 2
    with pytest.raises(ProtocolError, match="more than one cell of a column"):
        label.receive("shop", Histograms(tree=0, depth=0, frame=histograms.frame, cells=cells))
    with pytest.raises(ProtocolError, match="cell states"):
        label.receive("shop", Histograms(tree=0, depth=0, frame=histograms.frame, cells=cells[:-1]))
    (answer,) = label.receive("shop", histograms)  # still the genuine one is taken
    assert isinstance(answer.message, (Record, Level))


def test_goss_rates_checked_together():
    with pytest.raises(ConfigError, match="goss_other_rate"):
        BoostParams(goss_top_rate=0.2)
    with pytest.raises(ConfigError, match="goss_other_rate"):
        BoostParams(goss_top_rate=0.5, goss_other_rate=0.6)
