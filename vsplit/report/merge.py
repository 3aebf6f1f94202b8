"""Merge each partner's own ``report.json`` into a copy of the label party's report, refusing what a partner could
forge.

Theory of operation. The label party's ``<run>/<label>/report.json`` is its own record and is never rewritten: the
merged view goes to ``report-merged.json`` next to it. Every other ``<run>/<folder>/report.json`` adds exactly two
things, both keyed by the folder it came from: that party's ``communication`` and its own config hash. A file whose
``party`` differs from its folder, that claims the hash of another party, that sits in the label party's name, or
that is not a well-formed report is refused with a :class:`~vsplit.errors.DataError` naming the file; nothing is
written then.

Example:
    >>> import json, pathlib, tempfile
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> (run / "partner").mkdir()
    >>> _ = (run / "partner" / "report.json").write_text(json.dumps({"party": "bank", "communication": {
    ...     "sent": {}, "received": {}}}))
    >>> merge_reports(run, {"party": "bank", "communication": {"bank": {}}, "config_hashes": {}})
    Traceback (most recent call last):
    ...
    vsplit.errors.DataError: .../partner/report.json: says party 'bank' but sits in folder 'partner'; ...
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from vsplit.errors import DataError

MERGED = "report-merged.json"
_HASH = re.compile(r"^[0-9a-f]{64}$")


def read_report(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or a :class:`DataError` naming the file."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON report ({exc}); restore the file the run wrote") from None
    if not isinstance(report, dict):
        raise DataError(f"{path}: a report is a JSON object, this holds {type(report).__name__}; restore the file")
    return report


def _count(value: Any) -> bool:
    """True for a whole number of frames or bytes."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _traffic(path: Path, where: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise DataError(f"{path}: {where} must be an object of message kinds; restore the file the run wrote")
    for kind, t in value.items():
        if not isinstance(t, dict) or not all(_count(t.get(k)) for k in ("frames", "bytes")):
            raise DataError(f"{path}: {where}.{kind} must hold whole numbers frames and bytes; restore the file")


def partner_entries(path: Path, *, label_party: str) -> tuple[str, dict[str, Any], str | None]:
    """``(party, communication, config hash)`` of the partner report at ``path``, checked against its folder."""
    folder = path.parent.name
    theirs = read_report(path)
    claimed = theirs.get("party")
    if claimed != folder:
        raise DataError(f"{path}: says party {claimed!r} but sits in folder {folder!r}; a party's report belongs in "
                        "its own folder: refused, nothing merged (move the file or ask that party to resend it)")
    if folder == label_party:
        raise DataError(f"{path}: a second report of the label party {label_party!r}; refused, nothing merged")
    comm = theirs.get("communication")
    if not isinstance(comm, dict) or not {"sent", "received"} <= set(comm) <= {"sent", "received", "by_peer"}:
        raise DataError(f"{path}: 'communication' must hold 'sent' and 'received' (and optionally 'by_peer'), "
                        "nothing else; restore the file the run wrote")
    for direction in ("sent", "received"):
        _traffic(path, f"communication.{direction}", comm[direction])
    for peer, totals in comm.get("by_peer", {}).items():
        if not isinstance(totals, dict) or set(totals) != {"sent", "received"} or not all(
                _count(v) for v in totals.values()):
            raise DataError(f"{path}: communication.by_peer.{peer} must hold byte counts sent and received; restore "
                            "the file the run wrote")
    hashes = theirs.get("config_hashes", {})
    if not isinstance(hashes, dict) or set(hashes) - {folder}:
        others = sorted(set(hashes) - {folder}) if isinstance(hashes, dict) else hashes
        raise DataError(f"{path}: holds config hashes of other parties ({others}); a party reports only its own: "
                        "refused, nothing merged")
    own = hashes.get(folder)
    if own is not None and (not isinstance(own, str) or not _HASH.match(own)):
        raise DataError(f"{path}: config_hashes.{folder} is not a SHA-256 hex digest; restore the file the run wrote")
    return folder, comm, own


def merge_reports(run_dir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """A copy of the label party's ``report`` with every other party's own communication and config hash.

    Entries are keyed by the folder each ``report.json`` came from; the label party's own entries are never
    replaced. Raises :class:`DataError` (naming the file) for a forged or malformed partner report.
    """
    label = report.get("party")
    if not isinstance(label, str) or not isinstance(report.get("communication"), dict) \
            or not isinstance(report.get("config_hashes"), dict):
        raise DataError(f"{run_dir}: the label party's report lacks party, communication or config_hashes; restore "
                        "the report.json its run wrote")
    merged = copy.deepcopy(report)
    for path in sorted(run_dir.glob("*/report.json")):
        if path.parent.name == label:
            continue
        party, comm, digest = partner_entries(path, label_party=label)  # never the label party's own entries
        merged["communication"][party] = comm
        if digest is not None:
            merged["config_hashes"][party] = digest
        merged.setdefault("merged_from", {})[party] = str(path.relative_to(run_dir))
    return merged
