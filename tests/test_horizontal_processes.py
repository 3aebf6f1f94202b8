"""Horizontal schedules as OS processes over mutual TLS: three banks, a server and (SplitFed v1) a federated server.

Each party runs `vsplit run` in its own process; every party's model.npz must equal, bit for bit, the parameters
the same configs reach with every party in one process (vsplit.node.horizontal.run_in_process), with dropout. In the
SplitFed v1 case bank_1 reaches the server through a link emulator that resets the connection mid-run: the channel
redials (network.reconnect_timeout_s), nobody restarts or is dropped, and the parameters are still the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests._horizontal_support import hand_secrets
from tests._pilot_support import start, wait_all
from tests._transport_support import LinkEmulator
from vsplit.config import load_config
from vsplit.node.horizontal import HorizontalNode, run_in_process
from vsplit.pilot.horizontal import prepare_horizontal
from vsplit.pilot.processes import run_processes
from vsplit.runtime.checkpoint import load_checkpoint

CASES = {  # sequential relayed by the server: tests/test_horizontal_resume.py (uninterrupted after the resume)
    "splitfed_v1": ({"kind": "splitfed_v1"}, True, "vanilla"),
    # U-shaped segments, hand-offs over the banks' own links: each bank listens for the banks after it
    "sequential_direct_u_shaped": ({"kind": "sequential", "route": "direct", "order": "random_no_repeat"}, False,
                                   "u_shaped"),
}


#: bank_1's upstream bytes after which the link emulator resets its connection to the server (mid-run)
RESET_AT = 12_000


def _segments(root: Path, run_id: str, party: str) -> dict[str, torch.Tensor]:
    state = load_checkpoint(root / "runs" / run_id / party / "model.npz", run_id=run_id, party=party)
    return {f"{s}/{k}": torch.as_tensor(v) for s, sd in state["segments"].items() for k, v in sd.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_processes_equal_one_process(tmp_path: Path, case: str) -> None:
    schedule, federated, segments = CASES[case]
    run_id = f"h-{case}"
    # with dropout: SplitFed v1's server trains one copy per bank side by side, steps interleaved in arrival order,
    # and each copy must draw its masks from a stream of its own for the processes to equal one process
    kwargs = {"banks": 3, "run_id": run_id, "rows": 240, "federated": federated, "schedule": schedule,
              "train": {"epochs": 2, "batch_size": 64}, "segments": segments, "model": {"dropout": 0.2}}
    configs = prepare_horizontal(tmp_path / "tls", **kwargs)
    reference = prepare_horizontal(tmp_path / "mem", **kwargs)
    for prepared in (configs, reference):  # the same secrets: the same initial weights and dropout
        hand_secrets(prepared)
    run_in_process([HorizontalNode(load_config(p)) for p in reference.values()])
    logs = {p: tmp_path / f"{p}.log" for p in configs}
    server = load_config(configs["bank_1"]).network.dial
    assert server is not None
    host, _, port = server.rpartition(":")
    if case != "splitfed_v1":  # the pilots' launcher: one `vsplit train` process per party
        run_processes(configs, timeout=120)
    else:
        with LinkEmulator(target=(host, int(port)), resets=[("up", RESET_AT)]) as link:
            via = {"bank_1": ["--set", f"network.dial=127.0.0.1:{link.address[1]}"]}
            procs = {p: start(["run", "--config", str(c), "--quiet", *via.get(p, [])], log=logs[p])
                     for p, c in configs.items()}
            wait_all(procs, logs, timeout=120)
    if case == "splitfed_v1":  # the reset fell mid-run and the link came back
        print(f"bank_1 -> server: {link.passed} bytes, resets {link.resets_done}")
        assert len(link.resets_done) == 1 and link.connections == 2, (link.resets_done, link.passed)
        result = json.loads((tmp_path / "tls" / "runs" / run_id / "server" / "result.json").read_text())
        assert result["lost"] == [], result["lost"]  # redialed in time: not dropped
    for party in configs:
        if party == "fedserver":
            assert not (tmp_path / "tls" / "runs" / run_id / party / "model.npz").exists()  # it owns no segment
            continue
        got, want = _segments(tmp_path / "tls", run_id, party), _segments(tmp_path / "mem", run_id, party)
        assert got.keys() == want.keys() and got
        for name in want:
            assert torch.equal(got[name], want[name]), f"{party} {name} differs between processes and one process"


@pytest.mark.parametrize("kind", ["splitfed_v2", "sequential"])
def test_forked_processes_of_python_built_sides_equal_one_process(kind: str) -> None:
    """train_horizontal_processes (what benchmarks time): one forked process per party over mutual TLS."""
    import copy

    from tests._horizontal_support import data, horizontal, optimizer, segments
    from vsplit.horizontal import ClientSide, ServerSide, Settings, train_horizontal
    from vsplit.horizontal.run import train_horizontal_processes

    h, init, xy = horizontal("vanilla", (2,)), segments("vanilla", (2,)), data()

    def sides():
        clients = {c: ClientSide({"bottom": copy.deepcopy(init["bottom"])}, {"bottom": (x,)}, optimizer("adam"))
                   for c, (x, _) in xy.items()}
        server = ServerSide({"top": copy.deepcopy(init["top"])}, optimizer("adam"),
                            labels={c: y for c, (_, y) in xy.items()})
        return clients, server

    settings = Settings(kind=kind, rounds=2, batch_size=8, route="server")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the children run: the same summation order, the same bits
    try:
        reference = train_horizontal(h, settings, *sides())
        out, sent, seconds = train_horizontal_processes(h, settings, *sides())
    finally:
        torch.set_num_threads(threads)
    assert seconds > 0 and all(sent[p] > 0 for p in h.parties)
    for party in h.parties:
        want = {s: m.state_dict() for s, m in reference[party].modules.items()}
        got = {s: m.state_dict() for s, m in out[party].modules.items()}
        assert want.keys() == got.keys()
        for seg in want:
            assert all(torch.equal(want[seg][k], got[seg][k]) for k in want[seg]), (party, seg)
