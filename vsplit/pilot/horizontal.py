"""Set up a horizontal run on one machine: each bank's rows, keys and party.toml, a server, a federated server.

Used by ``vsplit pilot splitfed-credit`` and the process tests: the default-credit rows are dealt to the banks
(:func:`vsplit.datasets.horizontal.horizontal_split`), each bank's train and test rows go only to its own folder, every
party gets an identity and the certificates of the peers it talks to, every bank the clients' shared init seed
(``keys/clients.init-seed``, which the server never gets), and one ``party.toml`` per party is written as
docs/clients.md shows.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> configs = prepare_horizontal(root, banks=3, port=7800, run_id="doc", rows=200, federated=True)
    >>> sorted(configs)
    ['bank_1', 'bank_2', 'bank_3', 'fedserver', 'server']
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

SERVER, FEDERATED = "server", "fedserver"


def prepare_horizontal(
    root: Path,
    *,
    banks: int = 3,
    port: int | None = None,
    run_id: str,
    scheme: str = "iid",
    by: str | None = None,
    seed: int = 0,
    rows: int | None = None,
    federated: bool = False,
    schedule: Mapping[str, Any] | None = None,
    train: Mapping[str, Any] | None = None,
    segments: str = "vanilla",
    output_dir: str = "../runs",
    model: Mapping[str, Any] | None = None,
    data: Mapping[str, Any] | None = None,
    split: Any = None,
    extra: str = "",
) -> dict[str, Path]:
    """Tables, keys and configs under ``root`` (``rows``: at most this many train rows per bank); the configs.

    The server listens on ``port``, a federated server (``federated=True``) on ``port + 1``, bank ``i`` (direct
    sequential hand-offs) on ``port + 2 + i``; with ``port=None`` each on a port free now. ``output_dir`` is
    relative to each party's folder. ``split``: a :class:`~vsplit.datasets.horizontal.HorizontalSplit` of
    ``default_credit`` to use instead of dealing one here; ``model``, ``data``: ``[model]`` keys and the
    banks' further ``[data]`` keys (e.g. ``scaling``)."""
    from vsplit.atomic import save_with
    from vsplit.config.horizontal import signs_keys
    from vsplit.datasets.horizontal import horizontal_split
    from vsplit.pilot.prepare import ensure_keys

    root = Path(root)
    if split is None:
        split = horizontal_split("default_credit", clients=banks, scheme=scheme, by=by, seed=seed)
    banks = len(split.clients)
    clients = list(split.clients)
    for client in clients:
        for name, tables in (("train", split.train), ("test", split.test)):
            table = tables[client]
            if rows is not None:
                table = table.iloc[: rows if name == "train" else max(1, rows // 4)]
            # the coded columns (SEX, EDUCATION, MARRIAGE) as numbers: a bank's category codes come from the values
            # it has seen, and banks that saw different values would average unlike embeddings (the join refuses)
            table = table.astype({c: "int64" for c in split.categorical})
            save_with(root / client / "data" / f"{name}.parquet", lambda h, t=table: t.to_parquet(h, index=False))
    parties = [*clients, SERVER] + ([FEDERATED] if federated else [])
    ensure_keys(root, parties)
    share_clients_seed(root, clients)
    sched = {"kind": "splitfed_v1", **(schedule or {})}
    if federated:
        sched["federated_server"] = FEDERATED
    common = _toml("topology", {"kind": "horizontal", "clients": clients, "server": SERVER, "segments": segments})
    common += _toml("schedule", sched) + _toml("train", {"epochs": 2, "batch_size": 256, **(train or {})})
    if model:
        common += _toml("model", model)
    common += _toml("output", {"dir": output_dir, "run_id": run_id})
    configs: dict[str, Path] = {}
    from vsplit.transport.ports import free_ports

    ports = free_ports(2 + banks) if port is None else [port + i for i in range(2 + banks)]
    fed_address = f"127.0.0.1:{ports[1]}"
    for party in parties:
        net: dict[str, Any] = {"key": f"keys/{party}.key", "cert": f"keys/{party}.pem", "connect_timeout_s": 60,
                               "read_timeout_s": 120}
        if party in clients:
            peers = [SERVER] + ([FEDERATED] if federated else [])
            net["dial"] = f"127.0.0.1:{ports[0]}"
            if federated:
                net["addresses"] = {FEDERATED: fed_address}
            if signs_keys(kind=sched["kind"], route=sched.get("route", "server"), clients=banks,
                          secure_aggregation=sched.get("secure_aggregation", "auto"),
                          optimizer_policy=sched.get("optimizer_policy", "keep")):
                net["client_certs"] = {c: f"keys/peers/{c}.pem" for c in clients if c != party}
            if sched["kind"] == "sequential" and sched.get("route") == "direct":  # bank i listens on port + 2 + i
                me = clients.index(party)
                peers += [c for c in clients if c != party]
                net["listen"] = f"127.0.0.1:{ports[2 + me]}"
                net["addresses"] = {**net.get("addresses", {}),
                                    **{c: f"127.0.0.1:{ports[2 + i]}" for i, c in enumerate(clients[:me])}}
            head = _toml("party", {"name": party, "role": "label"})
            head += _toml("data", {"path": "data/train.parquet", "test_path": "data/test.parquet",
                                   "id_column": split_id(), "label": split.label, "positive_label": 1,
                                   **(data or {})})
        else:
            peers = clients
            net["listen"] = f"127.0.0.1:{ports[0]}" if party == SERVER else fed_address
            head = _toml("party", {"name": party, "role": "compute"})
        net["peers"] = {p: f"keys/peers/{p}.pem" for p in peers}
        configs[party] = root / party / "party.toml"
        configs[party].write_text(head + common + _toml("network", net) + extra)
    return configs


def share_clients_seed(root: Path, clients: list[str]) -> int:
    """The clients' shared init seed (:mod:`vsplit.horizontal.shared_seed`): the first client's
    ``keys/clients.init-seed`` (made if missing), copied (mode 0600) into every other client's key folder, as its
    certificate is; a client's differing copy is replaced. The server's folder never gets it."""
    from vsplit.horizontal.shared_seed import FILE
    from vsplit.models.secret import read_or_create, write_secret

    seed = read_or_create(root / clients[0] / "keys" / FILE)
    for client in clients[1:]:
        path = root / client / "keys" / FILE
        if path.exists() and read_or_create(path) != seed:
            path.unlink()
        if not path.exists():
            write_secret(path, seed)
    return seed


def split_id() -> str:
    from vsplit.datasets.horizontal import ID_COLUMN

    return ID_COLUMN


def _toml(section: str, values: Mapping[str, Any]) -> str:
    lines = [f"[{section}]"]
    for key, value in values.items():
        lines.append(f"{key} = {_value(value)}")
    return "\n".join(lines) + "\n\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_value(v) for v in value) + "]"
