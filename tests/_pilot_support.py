"""Helpers for tests that run parties as separate OS processes over mutual TLS on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_configs(root: Path, *, port: int, run_id: str, extra: str = "", bank_extra: str = "") -> dict[str, Path]:
    """party.toml for a bank (label) and a partner (feature) laid out by vsplit.pilot.prepare."""
    bank = root / "bank" / "party.toml"
    bank.write_text(f"""
[party]
name = "bank"
role = "label"
[data]
path = "data/train.parquet"
test_path = "data/test.parquet"
label = "y"
positive_label = "yes"
[network]
listen = "127.0.0.1:{port}"
key = "keys/bank.key"
cert = "keys/bank.pem"
peers = {{ partner = "keys/peers/partner.pem" }}
connect_timeout_s = 60
read_timeout_s = 60
[output]
dir = "../runs"
run_id = "{run_id}"
{extra}
{bank_extra}
""")
    partner = root / "partner" / "party.toml"
    partner.write_text(f"""
[party]
name = "partner"
role = "feature"
[data]
path = "data/train.parquet"
test_path = "data/test.parquet"
[network]
dial = "127.0.0.1:{port}"
key = "keys/partner.key"
cert = "keys/partner.pem"
peers = {{ bank = "keys/peers/bank.pem" }}
connect_timeout_s = 60
read_timeout_s = 60
[output]
dir = "../runs"
run_id = "{run_id}"
{extra}
""")
    return {"bank": bank, "partner": partner}


def start(args: list[str], *, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    handle = open(log, "w")  # the child owns it from here
    return subprocess.Popen([sys.executable, "-m", "vsplit.cli.main", *args], stdout=handle, stderr=subprocess.STDOUT,
                            env=env, cwd=REPO)


def wait_all(processes: dict[str, subprocess.Popen], logs: dict[str, Path], *, timeout: float) -> None:
    for name, proc in processes.items():
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in processes.values():
                p.kill()
            raise AssertionError(f"{name} did not finish in {timeout} s:\n{logs[name].read_text()[-3000:]}") from None
        assert code == 0, f"{name} exited with {code}:\n{logs[name].read_text()[-3000:]}"
