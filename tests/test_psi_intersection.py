"""PSI(A, B) == A ∩ B: both parties get exactly the shared IDs, in one agreed order, with their own row indices."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.errors import AlignmentError, RemoteAbort
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.psi import IdPolicy, LabelParty, Partner, PsiConfig, normalise_id
from vsplit.runtime.inprocess import connect, run_machines
from vsplit.runtime.psi import align_in_process

ID = st.one_of(st.integers(0, 25), st.sampled_from(["a", "b", "Zoë", "x y", " a", "A", "007", "7"]))
POLICY = IdPolicy(dedupe="first")


def first_rows(values: list[object]) -> dict[str, int]:
    rows: dict[str, int] = {}
    for row, value in enumerate(values):
        rows.setdefault(normalise_id(value, policy=POLICY), row)
    return rows


def check_alignment(tables: dict[str, list[object]], out: dict) -> None:
    rows = {name: first_rows(values) for name, values in tables.items()}
    expected = set.intersection(*(set(r) for r in rows.values()))
    order = out["bank"].ids
    assert set(order) == expected and len(order) == len(expected)
    for name, values in tables.items():
        alignment = out[name]
        assert alignment.ids == order  # one agreed order
        assert alignment.rows.tolist() == [rows[name][i] for i in order]  # each party's own (first) rows
        assert [normalise_id(v, policy=POLICY) for v in alignment.take(values)] == order
        assert alignment.stats.intersection == len(order)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bank=st.lists(ID, max_size=30),
    shop=st.lists(ID, max_size=30),
    reveal=st.sampled_from(["both", "label_party"]),
    chunk=st.integers(1, 9),
    window=st.integers(1, 3),
)
def test_both_parties_get_exactly_the_intersection_in_one_order(bank, shop, reveal, chunk, window) -> None:
    tables = {"bank": bank, "shop": shop}
    config = PsiConfig(reveal=reveal, chunk=chunk, window=window)
    policies = {"bank": POLICY, "shop": POLICY}
    if not set(first_rows(bank)) & set(first_rows(shop)):
        with pytest.raises(AlignmentError, match=r"no customer is shared|no IDs to align"):
            align_in_process(tables, label_party="bank", config=config, policies=policies)
        return
    check_alignment(tables, align_in_process(tables, label_party="bank", config=config, policies=policies))


@settings(max_examples=25, deadline=None)
@given(
    bank=st.lists(ID, max_size=25),
    shop=st.lists(ID, max_size=25),
    telco=st.lists(ID, max_size=25),
    reveal=st.sampled_from(["both", "label_party"]),
)
def test_three_parties_share_the_intersection_of_intersections(bank, shop, telco, reveal) -> None:
    tables = {"bank": bank, "shop": shop, "telco": telco}
    config = PsiConfig(reveal=reveal, chunk=4)
    policies = dict.fromkeys(tables, POLICY)
    if not set(first_rows(bank)) & set(first_rows(shop)) & set(first_rows(telco)):
        with pytest.raises(AlignmentError, match=r"no customer is shared|no IDs to align"):
            align_in_process(tables, label_party="bank", config=config, policies=policies)
        return
    check_alignment(tables, align_in_process(tables, label_party="bank", config=config, policies=policies))


def test_three_party_alignment_keeps_only_rows_all_share() -> None:
    out = align_in_process(
        {"bank": ["a", "b", "c", "d"], "shop": ["d", "c", "b", "x"], "telco": ["c", "d", "a"]}, label_party="bank"
    )
    assert sorted(out["bank"].ids) == ["c", "d"]
    assert out["bank"].ids == out["shop"].ids == out["telco"].ids
    assert out["bank"].stats.peer_sizes == {"shop": 4, "telco": 3}


def test_the_order_is_not_the_label_partys_table_order() -> None:
    ids = [f"customer-{i:04d}" for i in range(200)]
    out = align_in_process({"bank": ids, "shop": ids[::-1]}, label_party="bank")
    assert out["bank"].rows.tolist() != sorted(out["bank"].rows.tolist())
    assert out["shop"].take(ids[::-1]) == out["bank"].take(ids)


@pytest.mark.parametrize("empty", ["bank", "shop"])
def test_a_party_without_ids_ends_the_run_with_no_overlap(empty: str) -> None:
    tables = {"bank": ["a"], "shop": ["a"]}
    tables[empty] = []
    with pytest.raises(AlignmentError, match="no IDs to align"):
        align_in_process(tables, label_party="bank")
    pumps = connect(["bank", "shop"], session=b"s" * 16)
    machines = {
        "bank": LabelParty(tables["bank"], partners=["shop"]),
        "shop": Partner(tables["shop"], label_party="bank"),
    }
    with pytest.raises(RemoteAbort) as caught:
        run_machines(pumps, machines)
    assert caught.value.code == AbortCode.NO_OVERLAP


@pytest.mark.parametrize("reveal", ["both", "label_party"])
def test_disjoint_sets_fail_before_training_and_the_peer_gets_no_overlap(reveal: str) -> None:
    config = PsiConfig(reveal=reveal)
    aborts: list[tuple[str, int]] = []
    tap = lambda sender, to, msg, frame: aborts.append((sender, msg.code)) if isinstance(msg, Abort) else None  # noqa: E731
    pumps = connect(["bank", "shop"], session=b"s" * 16, taps=[tap])
    machines = {
        "bank": LabelParty(["a", "b"], partners=["shop"], config=config),
        "shop": Partner(["c", "d"], label_party="bank", config=config),
    }
    if reveal == "label_party":  # only the label party can tell: the partner hears the code
        with pytest.raises(RemoteAbort) as caught:
            run_machines(pumps, machines)
        assert caught.value.code == AbortCode.NO_OVERLAP
        assert aborts == [("bank", AbortCode.NO_OVERLAP)]
    else:  # both see it; each tells the other NO_OVERLAP and fails locally
        with pytest.raises(AlignmentError, match="no customer is shared"):
            run_machines(pumps, machines)
        assert sorted(aborts) == [("bank", AbortCode.NO_OVERLAP), ("shop", AbortCode.NO_OVERLAP)]
        with pytest.raises(AlignmentError, match="no customer is shared"):
            _ = machines["shop"].result
    with pytest.raises(AlignmentError, match="no customer is shared"):
        _ = machines["bank"].result
