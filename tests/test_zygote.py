"""The tests' party processes (tests/_zygote.py) behave as ``python -m vsplit.cli.main`` would: exit codes, output in
the log, the working folder asked for, signals, and a timeout that raises as Popen's does."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from _zygote import spawn


def test_a_forked_command_exits_with_the_clis_code_and_writes_its_log(tmp_path):
    log = tmp_path / "version.log"
    proc = spawn(["--version"], log=log, cwd=tmp_path, env=dict(os.environ))
    assert log.exists()  # there when spawn returns, as a file opened for Popen
    assert proc.wait(timeout=120) == 0 and proc.returncode == 0
    assert log.read_text().startswith("vsplit ")
    # a relative --config is read from the folder asked for; the error names it and the exit code is the CLI's
    bad = spawn(["train", "--config", "missing.toml"], log=tmp_path / "bad.log", cwd=tmp_path, env=dict(os.environ))
    assert bad.wait(timeout=60) == 1
    assert "missing.toml not found" in (tmp_path / "bad.log").read_text()


def test_kill_is_reported_as_popen_reports_it(tmp_path):
    from _pilot_support import free_port, small, write_configs

    from vsplit.datasets import preset
    from vsplit.pilot.prepare import prepare_preset

    prepare_preset(small(preset("secretflow_bank"), 200, 50), tmp_path)
    configs = write_configs(tmp_path, port=free_port(), run_id="alone")
    # the bank listens for a partner that never comes (for up to a minute)
    proc = spawn(["train", "--config", str(configs["bank"]), "--quiet"], log=tmp_path / "bank.log", cwd=tmp_path,
                 env=dict(os.environ))
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1.0)
    assert proc.poll() is None
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
