"""A party's log.txt is capped and rotated (issue 29): however much is logged, at most three files of the cap."""

from __future__ import annotations

import logging

from vsplit.cli.logs import BACKUPS, log_to_run_folder


def test_log_is_rotated_past_its_cap(tmp_path):
    cap_mb = 0.01  # about 10 KB
    with log_to_run_folder(tmp_path, max_mb=cap_mb):
        for i in range(1500):  # about 120 KB of warnings
            logging.getLogger("vsplit.transport.connect").warning("refused a connection %d from 192.0.2.1", i)
    files = sorted(p.name for p in tmp_path.glob("log.txt*"))
    assert files == ["log.txt", "log.txt.1", "log.txt.2"] and BACKUPS == 2
    assert all(p.stat().st_size <= cap_mb * (1 << 20) for p in tmp_path.glob("log.txt*"))
    assert "refused a connection 1499" in (tmp_path / "log.txt").read_text()
