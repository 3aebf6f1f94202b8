"""A pair's PSI progress on disk, so that a rerun after a party died starts from the buckets both sides finished.

Theory of operation. Buckets are independent PSI runs, processed in order, so a pair's progress is one number: the
count of leading buckets this side has finished. This side has finished bucket ``k`` when every chunk of it that
it sent was answered and every chunk of it the peer sent was answered by this side; from then on nothing of the
bucket can change. For a finished bucket a side keeps what it needs later: its layout (the row at each position it
sent, which the peer's matches and selections refer to) and, where it learns the overlap, the bucket's matches.

What is written, under the folder given (one per pair; :class:`PairState`), each file atomically, in this order:
``layout-KKKK.npy`` when bucket ``k`` is laid out (before its first point is sent), ``matches-KKKK.npz`` when it
is finished, then ``state.json`` with ``done = k + 1``. ``state.json`` also holds the session salt, a fingerprint
of the settings (protocol version, role, peer, buckets, chunk, reveal, label, context), the padded bucket size, a
digest of this side's salted hashes (its inputs) and the peer's announced total. A crash between two writes leaves
``done`` at the last bucket whose files are complete.

A rerun's :class:`~vsplit.psi.messages.Hello` carries :attr:`PairState.tag` (a hash of the old salt; empty without
state) and :attr:`PairState.done`. If both tags are equal, both sides take the old salt (so every ID falls into the
same bucket as before), restore the first ``min(done, peer's done)`` buckets and stream the rest with fresh
scalars, as after a :class:`~vsplit.psi.messages.Redo`; otherwise both start afresh and the old state is dropped.
The union of matches is the intersection either way. What a rerun reveals to the peer: how far this side got
(progress only). A side whose inputs changed since the state was written would mix old and new rows bucket by
bucket, so it refuses to resume (:class:`~vsplit.errors.DataError` naming the folder to delete).

Example:
    >>> import tempfile
    >>> from vsplit.psi.config import PsiConfig
    >>> state = PairState(tempfile.mkdtemp(), role="label", peer="shop", config=PsiConfig(buckets=2))
    >>> state.tag, state.done
    ('', 0)
    >>> state.begin(salt=bytes(32), digest="d", size=4, keep=0)
    >>> state.save_layout(0, np.array([2, -1, 0, 1]))
    >>> state.finish(0, peer_total=8, matches=(np.zeros((1, 32), np.uint8), np.array([2]), np.array([5])))
    >>> again = PairState(state.folder, role="label", peer="shop", config=PsiConfig(buckets=2))
    >>> again.done, again.layout(0).tolist(), again.matches(0)[2].tolist(), len(again.tag)
    (1, [2, -1, 0, 1], [5], 64)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from vsplit import strict_json
from vsplit.atomic import save_with, write_atomic
from vsplit.errors import DataError
from vsplit.psi.config import PSI_VERSION, PsiConfig

META = "state.json"


def salt_tag(salt: bytes) -> str:
    """The hex tag a Hello carries for ``salt``: equal tags mean both sides kept the same session's state."""
    return hashlib.sha256(b"vsplit-psi resume" + salt).hexdigest()


class PairState:
    """One pair's resumable progress in ``folder`` (created when first written).

    Args:
        folder: this pair's own folder (e.g. ``<run folder>/psi-state/train/<peer>``); nobody else writes there.
        role: this side's role, ``"label"`` or ``"partner"``.
        peer: the peer's name.
        config: the run's settings; state written under other settings is ignored (and replaced).
    """

    def __init__(self, folder: str | Path, *, role: str, peer: str, config: PsiConfig) -> None:
        self.folder = Path(folder)
        self._fingerprint = {"version": PSI_VERSION, "role": role, "peer": peer, "buckets": config.buckets,
                             "chunk": config.chunk, "reveal": config.reveal, "label": config.label.hex(),
                             "context": config.context}
        self._meta: dict[str, Any] | None = None
        try:
            meta = json.loads((self.folder / META).read_bytes()) if (self.folder / META).is_file() else None
        except (OSError, ValueError, RecursionError):
            meta = None  # a state.json cut short by a crash of its write: nothing to resume, as if none were there
        if isinstance(meta, dict) and meta.get("fingerprint") == self._fingerprint:
            self._meta = self._checked(meta, buckets=config.buckets)

    def _checked(self, meta: dict[str, Any], *, buckets: int) -> dict[str, Any]:
        """``meta`` (written under this run's settings) if its values are what :meth:`begin` and :meth:`finish`
        write; a :class:`DataError` naming the folder to delete otherwise."""
        def whole(value: Any, top: int | None = None) -> bool:
            return type(value) is int and 0 <= value and (top is None or value <= top)

        salt = meta.get("salt")
        problems = [name for name, ok in (
            ("salt", isinstance(salt, str) and len(salt) == 64 and all(c in "0123456789abcdef" for c in salt)),
            ("digest", isinstance(meta.get("digest"), str)), ("size", whole(meta.get("size"))),
            ("peer_total", whole(meta.get("peer_total"))), ("done", whole(meta.get("done"), buckets)),
        ) if not ok]
        if problems:
            raise DataError(f"PSI resume: {self.folder / META} is damaged ({', '.join(problems)} not as written); "
                            f"delete {self.folder} (the PSI then starts afresh) and rerun both parties")
        return meta

    @property
    def tag(self) -> str:
        """The hash of the kept session's salt (hex), or ``""`` when there is nothing to resume."""
        return salt_tag(bytes.fromhex(self._meta["salt"])) if self._meta else ""

    @property
    def done(self) -> int:
        """Leading buckets this side finished in the kept session."""
        return int(self._meta["done"]) if self._meta else 0

    @property
    def salt(self) -> bytes:
        """The kept session's salt."""
        assert self._meta is not None
        return bytes.fromhex(self._meta["salt"])

    @property
    def peer_total(self) -> int:
        """The peer's announced total in the kept session (0 before its first chunk)."""
        return int(self._meta["peer_total"]) if self._meta else 0

    def check_inputs(self, *, digest: str, size: int) -> None:
        """Raise :class:`DataError` unless this side's inputs hash as they did when the state was written."""
        assert self._meta is not None
        if self._meta["digest"] != digest or int(self._meta["size"]) != size:
            raise DataError(
                f"PSI resume: this party's IDs changed since the interrupted run whose progress is in {self.folder}; "
                "restore the original input, or delete that folder (then the PSI starts afresh) and rerun both parties"
            )

    def begin(self, *, salt: bytes, digest: str, size: int, keep: int) -> None:
        """Start writing a session: a new one (``salt`` differs from the kept one: old files go) or the kept one
        resumed after its first ``keep`` buckets (later buckets' files go)."""
        if self._meta is None or self._meta["salt"] != salt.hex():
            shutil.rmtree(self.folder, ignore_errors=True)
            self._meta = {"fingerprint": self._fingerprint, "salt": salt.hex(), "digest": digest, "size": size,
                          "peer_total": 0, "done": 0}
        else:
            self._meta["done"] = keep
            for stale in [*self.folder.glob("matches-*.npz"), *self.folder.glob("layout-*.npy")]:
                if int(stale.stem.split("-")[1]) >= keep:
                    stale.unlink(missing_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._write_meta()

    def save_layout(self, bucket: int, order: np.ndarray) -> None:
        """Bucket ``bucket``'s layout: the row sent at each of its positions (``-1``: a dummy)."""
        rows = np.ascontiguousarray(order, dtype=np.int64)
        save_with(self._path("layout", bucket), lambda f: np.save(f, rows, allow_pickle=False), mode=0o600)

    def finish(self, bucket: int, *, peer_total: int,
               matches: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> None:
        """Bucket ``bucket`` (the next one) is finished: keep its matches (values, own, peer positions), if this side
        learns them, then count it as done."""
        assert self._meta is not None and bucket == self._meta["done"], (bucket, self._meta)
        if matches is not None:
            values, own, peer = (np.ascontiguousarray(m) for m in matches)
            save_with(self._path("matches", bucket), lambda f: np.savez(f, values=values, own=own, peer=peer),
                      mode=0o600)
        self._meta.update(done=bucket + 1, peer_total=int(peer_total))
        self._write_meta()

    def layout(self, bucket: int) -> np.ndarray:
        """The layout :meth:`save_layout` kept for ``bucket``."""
        rows = self._load(self._path("layout", bucket))
        if rows.dtype != np.int64 or rows.ndim != 1:
            raise DataError(f"{self._path('layout', bucket)}: not a PSI layout; delete {self.folder} and rerun")
        return rows

    def matches(self, bucket: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The matches :meth:`finish` kept for ``bucket``: values (k, 32), own and peer positions."""
        path = self._path("matches", bucket)
        saved = self._load(path)
        if not {"values", "own", "peer"} <= saved.keys():
            raise DataError(f"{path}: not PSI matches; delete {self.folder} and rerun")
        values, own, peer = saved["values"], saved["own"], saved["peer"]
        positions = all(a.ndim == 1 and a.dtype.kind in "iu" and len(a) == len(values) for a in (own, peer))
        if values.dtype != np.uint8 or values.ndim != 2 or not positions:
            raise DataError(f"{path}: not PSI matches; delete {self.folder} and rerun")
        return values, own.astype(np.int64), peer.astype(np.int64)

    def clear(self) -> None:
        """Forget everything (after the alignment was saved)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        self._meta = None

    def _path(self, kind: str, bucket: int) -> Path:
        return self.folder / (f"{kind}-{bucket:04d}" + (".npy" if kind == "layout" else ".npz"))

    def _load(self, path: Path) -> Any:
        from vsplit.npy_files import read_npy_file, read_npz

        try:
            return read_npy_file(path) if path.suffix == ".npy" else read_npz(path)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
            raise DataError(f"PSI resume: cannot read {path} ({exc}); delete {self.folder} and rerun") from None

    def _write_meta(self) -> None:
        assert self._meta is not None
        write_atomic(self.folder / META, (strict_json.dumps(self._meta, indent=1) + "\n").encode(), mode=0o600)
