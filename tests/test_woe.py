"""WOE binning and IV across the cut, in one process: equal to the pooled computation, frames that carry no label, no
value, no edge and no row's bin, and bad input that fails naming the attribute or the party.

A bank and two partners (shop: named attributes, a categorical one, missing values; telco: anonymous) over the
in-memory channels and the real codec; 1024-bit test keys.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("heu")

from vsplit.errors import DataError, ProtocolError
from vsplit.he import generate_keypair
from vsplit.woe import ClassingParams, LabelWoe, PartnerWoe, coarse_classes, fit_fine_bins, information_value
from vsplit.woe.classing import merge_counts
from vsplit.woe.messages import WoeClassing, WoeHello, WoeLabels, WoeShape, WoeSums

ROWS = 1500
SMALL = {"key_bits": 1024, "insecure_small_key_for_tests": True}


def _views(seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = np.array([f"c{i:05d}" for i in range(ROWS)])
    income, debt, calls = rng.normal(size=ROWS), rng.normal(size=ROWS), rng.poisson(3, ROWS).astype(float)
    region = rng.choice(["north", "south", "east", "west"], ROWS, p=[0.4, 0.3, 0.2, 0.1])
    logit = -1.5 + 0.8 * income - 1.1 * debt + 0.6 * (region == "east") + 0.2 * calls
    y = (rng.random(ROWS) < 1 / (1 + np.exp(-logit))).astype(int)
    debt_seen = debt.copy()
    debt_seen[rng.random(ROWS) < 0.1] = np.nan
    bank = pd.DataFrame({"customer_id": ids, "income": income, "age": rng.integers(18, 80, ROWS), "y": y})
    shop = pd.DataFrame({"customer_id": ids, "debt": debt_seen, "region": region})
    telco = pd.DataFrame({"customer_id": ids, "calls": calls, "noise": rng.normal(size=ROWS)})
    # each partner knows most customers, in another order
    return {"bank": bank, "shop": shop.iloc[20:].sample(frac=1, random_state=1),
            "telco": telco.iloc[:-30].sample(frac=1, random_state=2)}


def _pooled(views: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The pooled table of the customers every party knows (the oracle's input)."""
    table = views["bank"]
    for name in ("shop", "telco"):
        table = table.merge(views[name], on="customer_id")
    return table.sort_values("customer_id").reset_index(drop=True)


def _woe_iv(events: np.ndarray, nonevents: np.ndarray) -> tuple[np.ndarray, float]:
    """WOE (optbinning's sign, 0 where a count is 0) and IV, written out again for the oracle."""
    e, n = events / events.sum(), nonevents / nonevents.sum()
    woe = np.array([np.log(b / a) if a > 0 and b > 0 else 0.0 for a, b in zip(e, n, strict=True)])
    return woe, float(((n - e) * woe).sum())


@pytest.fixture(scope="module")
def run():
    views = _views()
    frames = []

    def tap(sender, recipient, message, frame):
        frames.append((sender, recipient, message, bytes(frame)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = information_value(views, share_names={"shop": True, "telco": False}, fine_bins=10, alignment="join",
                                taps=[tap], **SMALL)
    return {"views": views, "out": out, "frames": frames, "pooled": _pooled(views)}


def test_woe_and_iv_equal_the_pooled_computation_for_every_party(run):
    pooled, out = run["pooled"], run["out"]
    y = pooled["y"].to_numpy()
    for party, binning in out.binnings.items():
        tables = [t for t in out.report.tables if t.party == party]
        for k, woe_map in enumerate(binning.maps):  # the owner's map applied to the pooled column
            coarse = woe_map.coarse(pooled[woe_map.name])
            events = np.bincount(coarse, weights=y, minlength=woe_map.n_coarse)
            rows = np.bincount(coarse, minlength=woe_map.n_coarse)
            woe, iv = _woe_iv(events, rows - events)
            assert np.abs(woe_map.woe - woe).max() <= 1e-12
            assert abs(binning.iv[woe_map.name] - iv) <= 1e-12
            assert abs(tables[k].iv - iv) <= 1e-12  # the label party's table of the same attribute
            assert tables[k].counts.tolist() == rows.tolist()
            # the classing is the one the pooled fine counts give
            fine = woe_map.fine.codes(pooled[woe_map.name])
            fe = np.bincount(fine, weights=y, minlength=woe_map.fine.n_bins)
            fn = np.bincount(fine, minlength=woe_map.fine.n_bins) - fe
            assert coarse_classes(fe, fn, kind=woe_map.fine.kind, params=ClassingParams()).tolist() == \
                woe_map.coarse_of_fine.tolist()
    assert set(out.binnings) == {"bank", "shop", "telco"}
    assert len(out.report.tables) == 6


def test_iv_ranks_the_informative_attributes_first_and_names_as_each_partner_chose(run):
    summary = run["out"].report.summary()
    assert summary["attribute"].tolist()[:2] == ["debt", "income"]
    assert set(summary["attribute"]) == {"income", "age", "debt", "region", "telco#0", "telco#1"}
    assert summary.set_index("attribute").loc["telco#1", "band"] == "useless"  # noise
    assert run["out"].binnings["telco"].select(min_iv=0.02) == ["calls"]


def test_woe_matrix_turns_a_partners_own_table_into_woe_values(run):
    shop = run["out"].binnings["shop"]
    table = run["views"]["shop"].head(50)
    matrix = shop.woe_matrix(table)
    region = shop.maps[1]
    assert matrix.shape == (50, 2)
    assert matrix[:, 1].tolist() == [region.woe[region.coarse_of_fine[region.fine.codes(pd.Series([v]))[0]]]
                                     for v in table["region"]]
    unseen = shop.woe_matrix(pd.DataFrame({"debt": [np.nan], "region": ["atlantis"]}))
    assert unseen[0, 1] == 0.0 and unseen[0, 0] == shop.maps[0].woe[-1]  # missing: its own bin's WOE


def test_frames_carry_no_label_value_edge_or_row_bin(run):
    frames, out = run["frames"], run["out"]
    pooled = run["pooled"]
    from_bank = [(m, f) for s, _, m, f in frames if s == "bank"]
    from_partners = [(s, m, f) for s, _, m, f in frames if s != "bank"]
    assert {type(m) for m, _ in from_bank} == {WoeHello, WoeLabels, WoeClassing}
    assert {type(m) for _, m, _ in from_partners} == {WoeShape, WoeSums}
    y = pooled["y"].to_numpy()
    label_bytes = [y.astype(dt)[:64].tobytes() for dt in (np.uint8, np.int32, np.int64, np.float32, np.float64)]
    assert not any(chunk in f for _, f in from_bank for chunk in label_bytes)
    for sender, _, frame in from_partners:
        binning = out.binnings[sender]
        for woe_map in binning.maps:
            column = pooled[woe_map.name]
            codes = woe_map.fine.codes(column)
            secrets = [codes.astype(dt)[:64].tobytes() for dt in (np.uint8, np.int32, np.int64)]
            if woe_map.fine.kind == "numeric":
                secrets += [column.to_numpy(dtype=np.float64)[:16].tobytes(),
                            woe_map.fine.edges.astype(np.float64)[:4].tobytes(),
                            woe_map.fine.edges.astype(np.float32)[:4].tobytes()]
            else:
                secrets += [c.encode() for c in woe_map.fine.categories]
            assert not any(s in frame for s in secrets), (sender, woe_map.name)
    assert not any(name.encode() in f for s, _, f in from_partners if s == "telco" for name in ("calls", "noise"))
    assert any(b"debt" in f for s, _, f in from_partners if s == "shop")  # shop shares its names


def _machines(labels: np.ndarray, codes: np.ndarray, fine, *, min_bin_rows: int = 1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        keys = generate_keypair(key_bits=1024, insecure_small_key_for_tests=True)
    label = LabelWoe(fine, codes=codes, labels=labels, partners=["shop"], keys=keys)
    partner = PartnerWoe(fine, codes=codes, label="bank", min_bin_rows=min_bin_rows, min_key_bits=1024,
                         insecure_small_key_for_tests=True)
    return label, partner


def _small_run():
    x = np.arange(200.0)
    fine = fit_fine_bins(pd.DataFrame({"x": x}), max_bins=4)
    labels = (np.arange(200) % 5 == 0).astype(float)
    return labels, np.column_stack([fine[0].codes(x)]), fine


def test_a_partner_returning_malformed_ciphertexts_is_named():
    labels, codes, fine = _small_run()
    label, partner = _machines(labels, codes, fine)
    hello, encrypted = (o.message for o in label.start())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        shape = partner.receive("bank", hello)[0].message
    sums = partner.receive("bank", encrypted)[0].message
    label.receive("shop", shape)
    frame = sums.frame.copy()
    frame[19:] = 0xFF  # every ciphertext above the modulus
    with pytest.raises(ProtocolError, match="partner 'shop' sent malformed bin sums"):
        label.receive("shop", WoeSums(frame=frame, skipped=sums.skipped))
    with pytest.raises(ProtocolError, match="partner 'shop' sent malformed bin sums"):
        label.receive("shop", WoeSums(frame=sums.frame[:-7], skipped=sums.skipped))


def test_a_partner_refuses_a_bin_below_its_minimum_naming_the_attribute():
    labels, codes, fine = _small_run()
    codes = codes.copy()
    codes[:3, 0] = fine[0].n_bins - 1  # three rows in the missing bin
    label, partner = _machines(labels, codes, fine, min_bin_rows=10)
    hello, encrypted = (o.message for o in label.start())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        partner.receive("bank", hello)
    with pytest.raises(ProtocolError, match=r"attribute 'x' has a bin of 3 rows, fewer than woe\.min_bin_rows = 10"):
        partner.receive("bank", encrypted)


def test_bad_input_fails_naming_the_attribute_or_the_party():
    views = _views()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        single = {**views, "telco": views["telco"].assign(flag=1.0)}
        with pytest.raises(DataError, match="attribute 'flag' of party 'telco' has a single value"):
            information_value(single, alignment="join", **SMALL)
        few = views["shop"].copy()
        few["debt"] = few["debt"].fillna(0.0)
        few.iloc[:3, few.columns.get_loc("debt")] = np.nan
        with pytest.raises(DataError, match=r"attribute 'debt' of party 'shop' has 3 missing values, fewer than "
                                            r"woe\.min_bin_rows = 20"):
            information_value({**views, "shop": few}, alignment="join", min_bin_rows={"shop": 20}, **SMALL)
        three = {**views, "bank": views["bank"].assign(y=np.arange(ROWS) % 3)}
        with pytest.raises(DataError, match="label 'y' of party 'bank' has 3 values"):
            information_value(three, alignment="join", **SMALL)


def test_fine_bins_merge_small_bins_and_pool_rare_categories():
    table = pd.DataFrame({"x": np.r_[np.zeros(5), np.arange(100.0)], "c": ["a"] * 60 + ["b"] * 42 + ["z"] * 3})
    x, c = fit_fine_bins(table, max_bins=10, min_bin_rows=8)
    assert np.bincount(x.codes(table["x"]))[:-1].min() >= 8
    assert c.codes(table["c"]).tolist() == [0] * 60 + [1] * 45  # "z" joins the smallest kept category
    events, nonevents = np.array([5, 0, 20, 30, 1]), np.array([95, 50, 80, 70, 0])
    coarse = coarse_classes(events, nonevents, kind="numeric", params=ClassingParams(min_bin_share=0.0))
    merged = merge_counts(events, nonevents, coarse)
    assert (merged[0][:-1] > 0).all() and (merged[1][:-1] > 0).all()  # no pure value bin is left
    rate = merged[0][:-1] / (merged[0][:-1] + merged[1][:-1])
    assert (np.diff(rate) >= 0).all()  # monotonic (auto: ascending here)


def test_the_woe_section_is_checked_naming_each_key(tmp_path):
    from vsplit.config import load_config
    from vsplit.errors import ConfigError

    path = tmp_path / "party.toml"
    path.write_text('[party]\nname = "bank"\nrole = "label"\n[data]\npath = "b.csv"\nlabel = "y"\n'
                    '[network]\nlisten = "127.0.0.1:7700"\nkey = "k"\ncert = "c"\npeers = { shop = "s.pem" }\n'
                    '[woe]\nfine_bins = 300\nmin_bin_rows = 0\nmonotonic = "up"\nkey_bits = 1024\n'
                    'select_top_k = -1\n')
    with pytest.raises(ConfigError) as error:
        load_config(path, check_files=False)
    text = str(error.value)
    for key in ("woe.fine_bins", "woe.min_bin_rows", "woe.monotonic", "woe.key_bits", "woe.select_top_k"):
        assert key in text
    path.write_text(path.read_text().split("[woe]")[0] + '[woe]\nshare_names = true\nselect_min_iv = 0.02\n')
    config = load_config(path, check_files=False)
    assert config.woe.share_names and config.woe.select_min_iv == 0.02 and config.woe.fine_bins == 20
