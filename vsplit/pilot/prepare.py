"""Lay out party folders for a pilot on a bundled preset: each party's own data, keys and certificates.

In a real pilot each organization does this on its own machine and sends only its certificate to the other
(checking the fingerprint out of band); here both folders sit side by side on one machine.

Layout, for each party ``P``::

    <root>/P/party.toml            (written only if missing, so local edits survive)
    <root>/P/data/train.parquet    P's own columns and customers (IDs as strings)
    <root>/P/data/test.parquet
    <root>/P/keys/P.key, P.pem     P's private key (0600) and certificate
    <root>/P/keys/peers/Q.pem      the certificate of each peer Q, pinned

Example:
    >>> import tempfile, pathlib
    >>> from vsplit.datasets import preset
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> folders = prepare_preset(preset("secretflow_bank"), root)
    >>> sorted(p.name for p in (root / "partner").rglob("*") if p.is_file())
    ['bank.pem', 'partner.key', 'partner.pem', 'test.parquet', 'train.parquet']
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vsplit.atomic import save_with
from vsplit.transport.identity import create_identity, write_identity


def export_tables(preset: Any, root: Path) -> None:
    """Write each party's train and test tables (``preset.train`` and ``.test``, or a mapping with those keys) to
    ``root/<party>/data/``."""
    for split in ("train", "test"):
        for party, table in (preset[split] if isinstance(preset, Mapping) else getattr(preset, split)).items():
            target = root / party / "data" / f"{split}.parquet"
            save_with(target, lambda handle, t=table: t.to_parquet(handle, index=False))


def ensure_keys(root: Path, parties: list[str]) -> dict[str, str]:
    """Create missing identities and pin every peer's certificate; return each party's fingerprint."""
    fingerprints = {}
    for party in parties:
        keys = root / party / "keys"
        if not (keys / f"{party}.pem").is_file() or not (keys / f"{party}.key").is_file():
            write_identity(create_identity(party), keys, force=True)
    from vsplit.transport.identity import fingerprint, load_certificate

    for party in parties:
        cert = root / party / "keys" / f"{party}.pem"
        fingerprints[party] = fingerprint(load_certificate(cert))
        for peer in parties:
            if peer != party:
                pins = root / peer / "keys" / "peers"
                pins.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(cert, pins / f"{party}.pem")
    return fingerprints


def prepare_preset(preset: Any, root: Path) -> dict[str, Path]:
    """Data and keys for every party of ``preset`` under ``root``; returns each party's folder."""
    root = Path(root)
    parties = list(preset.train)
    export_tables(preset, root)
    ensure_keys(root, parties)
    return {party: root / party for party in parties}
