"""A PSI interrupted part-way resumes from the buckets both sides finished, and the intersection is unchanged.

A run is "killed" by abandoning every machine after a chosen number of poll rounds (what a dead process leaves is
only its state folder); the rerun builds fresh machines on the same folders over fresh channels.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsplit.errors import DataError, RemoteAbort
from vsplit.psi import IdPolicy, LabelParty, Partner, PsiConfig
from vsplit.runtime.inprocess import connect, run_machines

POLICY = IdPolicy(dedupe="first")


def machines(tables, config, root, backend=None):
    partners = [n for n in tables if n != "bank"]
    out = {"bank": LabelParty(tables["bank"], partners=partners, config=config, policy=POLICY, backend=backend,
                              state_dir=root / "bank")}
    for name in partners:
        out[name] = Partner(tables[name], label_party="bank", config=config, policy=POLICY, backend=backend,
                            parties=len(tables), state_dir=root / name)
    return out


def run(tables, config, root, *, stop=None, backend=None):
    """Drive all parties; with ``stop``, abandon them after that many poll rounds (None if they finished first)."""
    ms = machines(tables, config, root, backend)
    pumps = connect(list(ms), session=os.urandom(16), links=[("bank", n) for n in ms if n != "bank"])
    if stop is None:
        return run_machines(pumps, ms), ms
    for name, machine in ms.items():
        pumps[name].begin(machine)
    for _ in range(stop):
        for name, machine in ms.items():
            if not machine.done:
                pumps[name].poll()
        if all(m.done for m in ms.values()):
            return {n: m.result for n, m in ms.items()}, ms
    return None, ms


def check(out, tables):
    expected = set.intersection(*({str(v) for v in values} for values in tables.values()))
    assert sorted(out["bank"].ids) == sorted(expected)
    for name, values in tables.items():
        assert [str(v) for v in out[name].take(values)] == out["bank"].ids


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(
    bank=st.lists(st.integers(0, 60), min_size=1, max_size=50),
    shop=st.lists(st.integers(0, 60), min_size=1, max_size=50),
    telco=st.none() | st.lists(st.integers(0, 60), min_size=1, max_size=50),
    buckets=st.integers(2, 5),
    reveal=st.sampled_from(["both", "label_party"]),
    stops=st.lists(st.integers(1, 40), min_size=1, max_size=2),
)
def test_a_run_killed_any_number_of_times_resumes_to_the_same_intersection(tmp_path_factory, bank, shop, telco,
                                                                            buckets, reveal, stops):
    tables = {"bank": bank, "shop": shop} | ({"telco": telco} if telco else {})
    if not set.intersection(*(set(v) for v in tables.values())):
        tables = {name: [*values, 99] for name, values in tables.items()}  # no overlap is another test's subject
    config = PsiConfig(buckets=buckets, reveal=reveal, chunk=4, window=2)
    root = tmp_path_factory.mktemp("psi")
    for stop in stops:
        out, _ = run(tables, config, root, stop=stop)
        if out is not None:
            break
    out, _ = run(tables, config, root)
    check(out, tables)


def test_the_rerun_restores_the_finished_buckets_and_sends_only_the_rest(tmp_path):
    tables = {"bank": list(range(0, 400)), "shop": list(range(200, 700)), "telco": list(range(100, 500, 2))}
    config = PsiConfig(buckets=8, chunk=16, window=2)
    whole, plain = run(tables, config, tmp_path / "whole")
    assert all(pair.resumed_from == 0 for pair in plain["bank"]._pairs.values())
    out, killed = run(tables, config, tmp_path / "cut", stop=60)
    assert out is None
    done = [pair.finished for pair in killed["bank"]._pairs.values()]
    assert 0 < min(done) < 8, done
    out, again = run(tables, config, tmp_path / "cut")
    check(out, tables)
    assert sorted(out["bank"].ids) == sorted(whole["bank"].ids)
    resumed = {name: pair.resumed_from for name, pair in again["bank"]._pairs.items()}
    assert all(r >= 1 for r in resumed.values()), resumed
    for name, pair in again["bank"]._pairs.items():  # exactly the unfinished buckets were sent again
        assert pair.points_sent * 8 == plain["bank"]._pairs[name].points_sent * (8 - resumed[name])


def test_changed_inputs_refuse_to_resume_and_name_the_folder(tmp_path):
    tables = {"bank": list(range(300)), "shop": list(range(100, 400))}
    config = PsiConfig(buckets=4, chunk=16, window=2)
    out, _ = run(tables, config, tmp_path, stop=25)
    assert out is None
    changed = {"bank": list(range(300)), "shop": list(range(101, 401))}
    ms = machines(changed, config, tmp_path)
    pumps = connect(list(ms), session=os.urandom(16), links=[("bank", "shop")])
    with pytest.raises(RemoteAbort):
        run_machines(pumps, ms)
    assert isinstance(ms["shop"].error, DataError)
    assert "IDs changed since the interrupted run" in str(ms["shop"].error)
    assert str(tmp_path / "shop" / "bank") in str(ms["shop"].error)


def test_a_side_that_lost_its_state_makes_both_start_afresh(tmp_path):
    import shutil

    tables = {"bank": list(range(300)), "shop": list(range(100, 400))}
    config = PsiConfig(buckets=4, chunk=16, window=2)
    out, _ = run(tables, config, tmp_path, stop=25)
    assert out is None
    shutil.rmtree(tmp_path / "shop")
    out, again = run(tables, config, tmp_path)
    check(out, tables)
    assert again["bank"]._pairs["shop"].resumed_from == 0


@pytest.mark.parametrize("seed", range(6))
def test_lost_scalars_in_the_killed_run_and_in_the_rerun_still_give_the_intersection(tmp_path, seed):
    """A Redo (a worker node lost a bucket's scalar) before the kill and another after it: the two compose."""
    import random

    from test_psi_redo import FlakyBackend

    rnd = random.Random(seed)
    tables = {"bank": [*rnd.sample(range(200), 80), 999], "shop": [*rnd.sample(range(200), 90), 999]}
    config = PsiConfig(buckets=rnd.randint(2, 5), chunk=4, window=2, reveal=rnd.choice(["both", "label_party"]))
    losses = [{rnd.randint(1, 30)}, {rnd.randint(1, 30)}]
    flaky = FlakyBackend(losses, ahead=rnd.randint(0, 3))
    out, _ = run(tables, config, tmp_path, stop=rnd.randint(5, 60), backend=flaky)
    if out is None:
        out, _ = run(tables, config, tmp_path, backend=FlakyBackend([{rnd.randint(1, 30)}], ahead=2))
    check(out, tables)
