"""What a run records at training time for serving: whom each party trained with, and the bank's training intersection.

Theory of operation. When a vertical run finishes, every party writes ``peers.json`` in its run folder: the SHA-256
fingerprint of each peer's pinned certificate (``network.peers``). A partner daemon serves a run only to the very bank
that trained it: the certificate it pinned for the connected bank must have the fingerprint the run recorded
(:func:`check_trained_with`), so a bank cannot make a partner serve another collaboration's run that happens to sit
in the same output folder under a label party of the same name. The label party also writes ``aligned-ids.npy``:
the IDs (as PSI compares them) of the customers every partner was aligned with in training, its own customers and
the only ones live mode uses as decoys (:mod:`vsplit.serve.decoys`). Both files are written 0600.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = write_peers(folder, {"bank": "AB:CD"})
    >>> trained_with(folder)
    {'bank': 'AB:CD'}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.config import PartyConfig, resolve
from vsplit.errors import ConfigError

log = logging.getLogger(__name__)

PEERS = "peers.json"
ALIGNED = "aligned-ids.npy"


def _write_private(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, created 0600, never through a symbolic link."""
    from vsplit.atomic import write_atomic

    write_atomic(path, data, mode=0o600)
    return path


def peer_fingerprints(config: PartyConfig) -> dict[str, str]:
    """The SHA-256 fingerprint of each peer's certificate pinned in ``config`` (``network.peers``)."""
    from vsplit.transport.identity import fingerprint, load_certificate

    return {peer: fingerprint(load_certificate(resolve(config, path), whose=f"{peer}'s certificate"))
            for peer, path in sorted(config.network.peers.items())}


def write_peers(folder: Path, peers: Mapping[str, str]) -> Path:
    """``peers.json`` in ``folder``: the fingerprints of the peers this run was trained with."""
    return _write_private(Path(folder) / PEERS, json.dumps({"peers": dict(peers)}, indent=1).encode())


def trained_with(folder: Path) -> dict[str, str] | None:
    """The peers' fingerprints a run recorded in ``folder`` (``None``: a run trained before this record existed)."""
    path = Path(folder) / PEERS
    try:
        peers = json.loads(path.read_text())["peers"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        raise ConfigError(f"{path}: not a readable record of the run's peers; it is written by vsplit train") from None
    if not isinstance(peers, dict) or not all(isinstance(v, str) for v in peers.values()):
        raise ConfigError(f"{path}: not a record of the run's peers; it is written by vsplit train")
    return peers


def record_run(node: Any, alignment: Any) -> None:
    """At the end of training: ``peers.json`` (every party), and the label party's ``aligned-ids.npy``."""
    config = node.config
    if not config.network.peers:
        return
    write_peers(node.folder, peer_fingerprints(config))
    if node.role != "label" or alignment is None:
        return
    from vsplit.psi.ids import IdPolicy, normalise_id

    ids = alignment.ids
    if ids is None:  # a streamed table: its ID source reads the aligned rows back
        source = node.party.ids
        ids = source.values_at(alignment.rows) if hasattr(source, "values_at") else \
            [source[r] for r in alignment.rows.tolist()]
    if ids is None:
        log.warning("%s: the training intersection could not be read back; live mode's decoys need it "
                    "(serve.k_anonymity > 1)", node.name)
        return
    policy = IdPolicy(casefold=config.psi.case_fold)
    canonical = np.asarray([normalise_id(v, policy=policy, row=i) for i, v in enumerate(ids)], dtype=str)
    import io

    buffer = io.BytesIO()
    np.save(buffer, canonical, allow_pickle=False)
    _write_private(Path(node.folder) / ALIGNED, buffer.getvalue())


def aligned_ids(folder: Path) -> list[str] | None:
    """The IDs of the run's training intersection (``None``: a run trained before this record existed)."""
    path = Path(folder) / ALIGNED
    if not path.is_file():
        return None
    try:
        ids = np.load(path, allow_pickle=False)  # never unpickle
    except (OSError, ValueError):
        raise ConfigError(f"{path}: not the run's training intersection; it is written by vsplit train") from None
    if ids.dtype.kind != "U" or ids.ndim != 1:
        raise ConfigError(f"{path}: not the run's training intersection; it is written by vsplit train")
    return ids.tolist()


def check_trained_with(config: PartyConfig, folder: Path, *, run_id: str, peer: str) -> None:
    """Refuse to serve run ``run_id`` (in ``folder``) to ``peer`` unless the run was trained with the certificate
    now pinned for ``peer``."""
    recorded = trained_with(folder)
    if recorded is None:
        log.warning("%s: run %s has no record of the peers it was trained with (trained by an older vsplit); "
                    "served because serve.runs names it", config.party.name, run_id)
        return
    pinned = peer_fingerprints(config).get(peer)
    if recorded.get(peer) != pinned:
        raise ConfigError(f"run {run_id!r} was trained with another {peer!r} than the one pinned in "
                          f"network.peers.{peer} ({'none' if recorded.get(peer) is None else recorded[peer][:23]}..."
                          f" recorded); a partner serves a run only to the bank it trained it with")
