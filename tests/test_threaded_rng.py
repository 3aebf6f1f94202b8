"""Parties running in threads of one process draw their own random numbers, whatever the threads' interleaving.

torch has one global generator per process; :class:`vsplit.models.rng.PartyRng` swaps a party's stream in and out
of it. Without a lock, a thread that swapped its stream in while another's was live handed one party's numbers to
the other, so two runs of the same threaded in-process pilot with the same seeds gave different networks (a test
AUC of 0.563, 0.542 and 0.538 on three runs of tests/test_bag_pilot.py's bag). These tests fail without the lock.
"""

from __future__ import annotations

import threading
import time

import torch
from _pilot_support import free_port
from _three_party_support import COLUMNS, prepare_three_parties
from test_bag_pilot import IN_PROCESS, _nodes, _run_all, _shrink

from vsplit.models.rng import PartyRng


def _draws(rng: PartyRng, rounds: int, *, pause: float = 0.0) -> list[float]:
    out = []
    for _ in range(rounds):
        with rng:
            out.append(float(torch.rand(1)))
            time.sleep(pause)  # another thread is scheduled here, inside this party's block
            out.append(float(torch.rand(1)))
    return out


def test_two_threads_draw_exactly_their_own_streams_while_interleaved():
    alone = {name: _draws(PartyRng(seed), 30) for name, seed in (("bank", 1), ("shop", 2))}
    together: dict[str, list[float]] = {}
    rngs = {"bank": PartyRng(1), "shop": PartyRng(2)}
    threads = [threading.Thread(target=lambda n=n: together.update({n: _draws(rngs[n], 30, pause=0.001)}))
               for n in rngs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert together == alone


def test_the_global_stream_outside_every_block_is_untouched_by_threads_drawing_in_theirs():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    threads = [threading.Thread(target=_draws, args=(PartyRng(s), 20), kwargs={"pause": 0.0005}) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert torch.equal(torch.rand(3), expected)


def _threaded_bag(root) -> dict:
    prepare_three_parties(root, port=free_port(), run_id="again", extra=IN_PROCESS)
    _shrink(root, rows={"train": 1200, "test": 400})
    sets = {p: ["train.networks=2", 'model.numeric_embedding="auto"', "model.dropout=0.2"] for p in COLUMNS}
    results, errors = _run_all(_nodes(root, "again", sets, test=True))
    assert not errors, errors
    return results


def test_the_threaded_in_process_pilot_gives_the_same_networks_on_every_run(tmp_path):
    """Three nodes in threads over memory channels, twice, same seeds, with dropout: the same history, test metrics
    and saved weights of every party."""
    first, second = _threaded_bag(tmp_path / "one"), _threaded_bag(tmp_path / "two")
    assert first["bank"].history == second["bank"].history
    assert first["bank"].networks == second["bank"].networks
    assert first["bank"].test == second["bank"].test
    for party in COLUMNS:
        runs = [sorted((tmp_path / run / "runs" / "again" / party).glob("*.npz")) for run in ("one", "two")]
        assert [p.name for p in runs[0]] == [p.name for p in runs[1]] and runs[0], party
        assert [p.read_bytes() for p in runs[0]] == [p.read_bytes() for p in runs[1]], party
