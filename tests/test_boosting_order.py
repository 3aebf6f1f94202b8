"""Categorical codes ordered by rate (``order_categories``): the first tree's root renumbers every party's categorical
codes by the label party's smoothed label rate, so one threshold splits the categories by rate.

The split estimator grows the pooled twin's trees with the same renumbering; the order is the categories' rate order
computed from the labels directly; only the partner with categorical columns gets an :class:`Order`, once, before
any record, and nothing else it is sent or sends changes; bad orders are refused. On data whose rate order differs
from the frequency order, the ordered trees beat the unordered ones with the same settings.

1024-bit OU keys behind the test-only flag; 600 rows.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from vsplit import SplitBoostClassifier
from vsplit.boosting import PartnerBoost
from vsplit.boosting.messages import BoostHello, BoostReady, Order, Record
from vsplit.errors import ProtocolError
from vsplit.pooled_trees import PooledBoostClassifier

pytestmark = [pytest.mark.filterwarnings("ignore:a [0-9]+-bit homomorphic key:UserWarning"),
              pytest.mark.filterwarnings("ignore:.* unknown to a partner:UserWarning")]
SETTINGS = dict(n_estimators=4, max_depth=2, max_bins=12, key_bits=1024, insecure_small_key_for_tests=True,
                learning_rate=0.3)
#: a category's event rate; its frequency rank (the codes' order before ordering) is unrelated to it
RATES = {"a": 0.05, "b": 0.6, "c": 0.1, "d": 0.5, "e": 0.2, "f": 0.4, "g": 0.3}
REGION_RATES = {"north": 0.1, "south": 0.5, "east": 0.3}


def _views(rows: int = 600, seed: int = 5) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{i}" for i in range(rows)])
    segment = rng.choice(list(RATES), size=rows, p=[0.25, 0.2, 0.15, 0.12, 0.12, 0.1, 0.06])
    region = rng.choice(list(REGION_RATES), size=rows, p=[0.5, 0.3, 0.2])
    age, calls = rng.normal(size=(2, rows))
    p = np.array([RATES[s] for s in segment]) * 0.7 + np.array([REGION_RATES[r] for r in region]) * 0.3
    y = np.where(rng.random(rows) < p, "yes", "no")
    return {"bank": pd.DataFrame({"customer_id": ids, "age": age, "region": region, "y": y}),
            "shop": pd.DataFrame({"customer_id": ids, "segment": segment}).iloc[::-1],
            "telco": pd.DataFrame({"customer_id": ids, "calls": calls}).sample(frac=1, random_state=2)}


@pytest.fixture(scope="module")
def views():
    return _views()


def _tapped(frames: list):
    """The in-process runtime's ``connect``, every message any party sends recorded as (sender, receiver, message)."""
    from vsplit.runtime import inprocess

    def connect(parties, *, taps=(), **kwargs):
        return inprocess.connect(parties, taps=[*taps, lambda s, r, m, f: frames.append((s, r, m))], **kwargs)

    return connect


@pytest.fixture(scope="module")
def fitted(views):
    """The split estimator and its pooled twin with ordered categories, every message of the split one tapped."""
    import vsplit.boosting_estimator as module

    frames: list[tuple[str, str, object]] = []
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore", UserWarning)
        patch.setattr(module, "connect", _tapped(frames))
        split = SplitBoostClassifier(order_categories=True, positive_label="yes", **SETTINGS).fit(views)
        twin = PooledBoostClassifier(order_categories=True, positive_label="yes", **SETTINGS).fit(views)
    return {"split": split, "twin": twin, "frames": frames}


def test_the_split_trees_equal_the_pooled_twins_with_the_same_renumbering(fitted, views):
    split, twin = fitted["split"], fitted["twin"]
    for mine, pooled in zip(split.model_.trees, twin.model_.trees, strict=True):
        assert {n: s.key() for n, s in mine.splits.items()} == {n: s.key() for n, s in pooled.splits.items()}
        assert max(abs(mine.leaves[n] - pooled.leaves[n]) for n in mine.leaves) <= 1e-6
    for name in ("bank", "shop", "telco"):
        a, b = split.bins_[name].ranks, twin.bins_[name].ranks
        assert (a is None) == (b is None) and (a is None or np.array_equal(a, b))
    assert split.bins_["telco"].ranks is None  # no categorical column: nothing to order
    fresh = _views(rows=200, seed=9)
    np.testing.assert_allclose(split.predict_proba(fresh), twin.predict_proba(fresh), rtol=0, atol=1e-6)
    assert {s.party for t in split.model_.trees for s in t.splits.values()} >= {0, 1}


def test_the_order_is_each_categorys_smoothed_rate_computed_from_the_labels(fitted, views):
    split = fitted["split"]
    bank = views["bank"].iloc[split.rows_["bank"]]
    shop = views["shop"].iloc[split.rows_["shop"]]
    y = (bank["y"].to_numpy() == "yes").astype(float)
    p0 = y.mean()
    for name, table, column in (("shop", shop, "segment"), ("bank", bank, "region")):
        values = table[column].to_numpy()
        # G / (H + lambda) at the base margin, per category, in floats: the order the ranks must follow
        key = {v: (p0 * (values == v).sum() - y[values == v].sum()) / (p0 * (1 - p0) * (values == v).sum() + 1.0)
               for v in np.unique(values)}
        assert min((values == v).sum() for v in key) >= split.min_category_rows  # every category is ordered
        expected = sorted(key, key=key.get)
        bins = split.bins_[name]
        encoded = split.encoders_[name][column]
        position = list(split.party_feature_names_in_[name]).index(column)
        numbers = np.full((len(expected), len(split.party_feature_names_in_[name])), np.nan)
        numbers[:, position] = [encoded.index(v) for v in expected]
        codes = bins.transform(numbers)[:, position]
        assert codes.tolist() == list(range(len(expected))), (name, expected)


def test_only_the_partner_with_categorical_columns_gets_one_order_before_any_record(fitted):
    sent = [(s, r, m) for s, r, m in fitted["frames"]]
    orders = [(r, m) for s, r, m in sent if isinstance(m, Order)]
    assert [r for r, _ in orders] == ["shop"]
    (_, order), = orders
    split = fitted["split"]
    assert order.columns.tolist() == [0]
    assert np.array_equal(order.ranks[0], split.bins_["shop"].ranks[0])
    to_shop = [m for s, r, m in sent if r == "shop"]
    first_record = next(i for i, m in enumerate(to_shop) if isinstance(m, Record))
    first_order = next(i for i, m in enumerate(to_shop) if isinstance(m, Order))
    assert first_order < first_record
    hello = next(m for m in to_shop if isinstance(m, BoostHello))
    assert hello.order == 1
    readies = {s: m for s, r, m in sent if isinstance(m, BoostReady)}
    assert readies["shop"].categorical.tolist() == [1] and readies["telco"].categorical.tolist() == [0]


def test_without_the_option_no_order_crosses_and_no_partner_names_its_categorical_columns(views):
    import vsplit.boosting_estimator as module

    frames: list = []
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore", UserWarning)
        patch.setattr(module, "connect", _tapped(frames))
        SplitBoostClassifier(positive_label="yes", **{**SETTINGS, "n_estimators": 1}).fit(views)
    assert not any(isinstance(m, Order) for *_, m in frames)
    assert all(len(m.categorical) == 0 for *_, m in frames if isinstance(m, BoostReady))


def test_ordering_the_categories_beats_their_frequency_order_on_rates_unrelated_to_frequency():
    train, test = _views(rows=3000, seed=1), _views(rows=3000, seed=2)
    settings = dict(n_estimators=6, max_depth=2, max_bins=12, learning_rate=0.3, positive_label="yes")
    plain = PooledBoostClassifier(**settings).fit(train).evaluate(test)["auc"]
    ordered = PooledBoostClassifier(order_categories=True, **settings).fit(train).evaluate(test)["auc"]
    assert ordered > plain + 0.005, (ordered, plain)


def _partner(categorical=(0,)) -> PartnerBoost:
    codes = np.array([[0, 1], [1, 0], [2, 2], [3, 1]] * 5)
    return PartnerBoost(codes, width=5, categorical=categorical, min_key_bits=1024, insecure_small_key_for_tests=True)


def test_an_order_that_is_no_permutation_or_moves_the_missing_code_is_refused():
    with pytest.raises(ProtocolError, match="permutation"):
        Order(columns=np.array([0], np.int32), ranks=np.array([[0, 0, 1, 2, 4]], np.int32))
    with pytest.raises(ProtocolError, match="permutation"):
        Order(columns=np.array([0], np.int32), ranks=np.array([[4, 0, 1, 2, 3]], np.int32))
    with pytest.raises(ProtocolError, match="twice"):
        Order(columns=np.array([0, 0], np.int32), ranks=np.tile(np.arange(5, dtype=np.int32), (2, 1)))
    with pytest.raises(ProtocolError, match="flag per column"):
        BoostReady(columns=2, width=5, categorical=np.array([1], np.uint8))


def test_a_partner_refuses_an_order_of_a_numeric_column_and_an_order_out_of_turn():
    from vsplit.he import generate_keypair

    keys = generate_keypair(scheme="ou", key_bits=1024, insecure_small_key_for_tests=True)
    hello = BoostHello(version=3, rows=20, scale=2**16, slot_bits=_slot_bits(keys), order=1,
                       key=np.frombuffer(keys.public.to_bytes(), dtype=np.uint8))
    partner = _partner()
    (ready,) = partner.receive("bank", hello)
    assert ready.message.categorical.tolist() == [1, 0]  # asked: it names its categorical columns
    good = Order(columns=np.array([0], np.int32), ranks=np.array([[1, 0, 3, 2, 4]], np.int32))
    with pytest.raises(ProtocolError, match="unexpected Order"):
        partner.receive("bank", good)  # before the first tree's root histograms
    numeric = Order(columns=np.array([1], np.int32), ranks=np.array([[1, 0, 3, 2, 4]], np.int32))
    partner = _partner()
    partner.receive("bank", hello)
    partner._expect = (Order,)  # as after the first tree's root histograms
    with pytest.raises(ProtocolError, match="not one of this party's categorical"):
        partner.receive("bank", numeric)
    partner.receive("bank", good)
    assert partner.codes[:4, 0].tolist() == [1, 0, 3, 2] and partner.codes[:4, 1].tolist() == [1, 0, 2, 1]


def _slot_bits(keys) -> int:
    from vsplit.boosting.gains import BOUNDS
    from vsplit.he import Packing

    return Packing.plan(scale=2**16, bounds=BOUNDS, max_rows=20, plaintext_bits=keys.public.plaintext_bits).slot_bits


def test_a_small_categorys_rank_does_not_depend_on_its_customers_labels(views):
    """A category of fewer than ``min_category_rows`` customers keeps its place after the ordered ones: flipping the
    labels of its customers leaves the Order the shop gets unchanged. With the guard lowered to one row, the same flip
    moves the category, so its rank would tell the shop those customers' labels."""
    import vsplit.boosting_estimator as module

    shop = views["shop"].copy()
    few = shop["customer_id"].iloc[:3].tolist()
    shop.loc[shop["customer_id"].isin(few), "segment"] = "rare"  # a category of three customers
    flipped = views["bank"].copy()
    at = flipped["customer_id"].isin(few)
    flipped.loc[at, "y"] = np.where(flipped.loc[at, "y"] == "yes", "no", "yes")

    def rare_code(bank: pd.DataFrame, min_rows: int) -> tuple[int, np.ndarray]:
        frames: list = []
        with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
            warnings.simplefilter("ignore", UserWarning)
            patch.setattr(module, "connect", _tapped(frames))
            split = SplitBoostClassifier(order_categories=True, min_category_rows=min_rows, positive_label="yes",
                                         **{**SETTINGS, "n_estimators": 1}).fit({**views, "bank": bank, "shop": shop})
        (order,) = [m for _, r, m in frames if isinstance(m, Order)]
        rare = float(split.encoders_["shop"]["segment"].index("rare"))
        return int(split.bins_["shop"].transform(np.array([[rare]]))[0, 0]), order.ranks

    guarded = [rare_code(bank, 30) for bank in (views["bank"], flipped)]
    assert guarded[0][0] == guarded[1][0] == len(RATES)  # after the seven ordered categories
    assert np.array_equal(guarded[0][1], guarded[1][1])
    exposed = [rare_code(bank, 1) for bank in (views["bank"], flipped)]
    assert exposed[0][0] != exposed[1][0]
