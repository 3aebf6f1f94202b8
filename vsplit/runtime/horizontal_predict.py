"""``vsplit predict`` for a horizontal split: a bank scores its own customers with its segments and the server's.

Each bank runs ``vsplit predict --config bank.toml --input new_customers.parquet`` and the server runs ``vsplit
predict --config server.toml`` (``--banks bank_1,bank_2`` to serve only those; by default every client of the
config). Each loads only its own ``model.npz``; they talk over mutual TLS with the pins of training, and the machines
are :mod:`vsplit.horizontal.predict`'s. A bank writes ``predictions.csv`` (its IDs, the score, a status) and
``predict.json``, the server ``predict.json`` (rows scored per bank, bytes, seconds), atomically, under
``<output.dir>/<run_id>/<party>/predictions/<job>/`` (one folder per scoring job, :mod:`vsplit.runtime.jobs`). In
FedAvg every bank holds the whole model and scores alone, without the server.
In sequential training the final client segment is the last bank's (its last turn): that bank scores, another is
refused with an error naming it.

Example:
    # the server, serving two banks
    vsplit predict --config runs/pilots/splitfed-credit/server/party.toml --banks bank_1,bank_2
    # each bank
    vsplit predict --config runs/pilots/splitfed-credit/bank_1/party.toml --input bank_1/test.parquet
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vsplit import strict_json
from vsplit.atomic import write_atomic
from vsplit.config import resolve
from vsplit.data.sources import read_table
from vsplit.errors import CheckpointError, ConfigError
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.runtime.jobs import PredictJob
from vsplit.runtime.node import session_id
from vsplit.runtime.pump import Pump

log = logging.getLogger(__name__)
#: Rows a bank sends per request.
BATCH_ROWS = 4096


def load_own_model(node: Any) -> None:
    """Load ``node``'s ``model.npz`` (its own segments, a bank's preprocessing) into ``node.modules``."""
    from vsplit.data.preprocess import TablePreprocessor

    path = node.folder / "model.npz"
    if not path.is_file():
        raise CheckpointError(f"{node.name}: no trained model at {path}; train first (vsplit run --config ...)")
    state = load_checkpoint(path, run_id=node.config.output.run_id, party=node.name)
    if state["horizontal"] != node.h.fingerprint() or state["schedule"] != node.settings.describe():
        raise CheckpointError(f"{path} was trained with other clients, server or schedule ({state['schedule']}); "
                              "predict with the config it was trained with")
    if node.party is not None and "preprocessor" in state:
        node.party.preprocessor = TablePreprocessor.from_state(state["preprocessor"])
    for name, module in node.modules.items():
        module.load_state_dict({k: torch.as_tensor(v) for k, v in state["segments"][name].items()})
        module.eval()


def final_holder(node: Any) -> str | None:
    """Sequential training: the bank whose client segment is the final one (the last turn); None otherwise."""
    from vsplit.horizontal.schedule import turns

    s = node.settings
    return turns(s, node.h.clients, s.rounds - 1)[-1] if s.kind == "sequential" else None


def _parts(node: Any) -> tuple[str, list[str], list[str]]:
    """The bank's source segment, the server's segments and the bank's segments after them, in order."""
    base, client = node.h.base, node.h.client
    source = next(s.name for s in base.sources_of(client))
    server = [s.name for s in base.segments if s.owner == node.h.server]
    after = [s.name for s in base.segments if s.owner == client and s.name != source]
    return source, server, after


def predict_bank(node: Any, table_path: Path, *, ids_path: Path | None = None, channels: Any = None,
                 job: PredictJob | None = None) -> Path:
    """A bank scores the customers of ``table_path`` (those in ``ids_path``, if given); ``predictions.csv`` in the
    folder of ``job`` (default: a new job, :mod:`vsplit.runtime.jobs`)."""
    from vsplit.horizontal.predict import ScoreClient

    if node.party is None:
        raise ConfigError(f"{node.name}: only a bank scores customers; the server runs `vsplit predict` without "
                          "--input")
    holder = final_holder(node)
    if holder is not None and holder != node.name:
        raise ConfigError(f"{node.name}: in sequential training the final client segment is {holder}'s (the last "
                          f"turn); score at {holder}, or train with a SplitFed schedule so that every bank holds it")
    job = job if job is not None else PredictJob.open(node.folder)
    began = time.perf_counter()
    load_own_model(node)
    d = node.config.data
    table = read_table(table_path, id_column=d.id_column, features=node.party.feature_columns or None,
                       option="--input")
    requested: list[str] | None = None
    if ids_path is not None:
        id_table = read_table(ids_path, id_column=d.id_column, features=[], option="--ids")
        requested = [str(v).strip() for v in id_table[d.id_column]]
        table = table[table[d.id_column].astype(str).isin(set(requested))].reset_index(drop=True)
    ids, inputs = node.party.prepare(table)
    source, server, after = _parts(node)
    started = time.perf_counter()
    stats: dict[str, Any] = {}
    with torch.no_grad():
        cut = [node.modules[source](*(t[i:i + BATCH_ROWS] for t in inputs)).numpy()
               for i in range(0, len(ids), BATCH_ROWS)]
        if node.settings.kind == "fedavg":  # the whole model is here
            outputs = [_run(node.modules, server + after, torch.from_numpy(x)) for x in cut]
        else:
            channels = dict(channels) if channels is not None else _dial_server(node)
            replies, stats = _exchange(node, channels, ScoreClient(node.h.server, cut))
            outputs = [_run(node.modules, after, torch.from_numpy(np.asarray(y))) for y in replies]
    proba = node.task.predict(torch.cat(outputs)) if outputs else np.zeros(0)
    seconds = {"load_and_prepare": round(started - began, 4), "score": round(time.perf_counter() - started, 4)}
    return _write_predictions(node, job, ids, proba, requested, seconds=seconds, communication=stats, began=began)


def _run(modules: Any, names: Sequence[str], x: torch.Tensor) -> torch.Tensor:
    for name in names:
        x = modules[name](x)
    return x


def _write_predictions(node: Any, job: PredictJob, ids: np.ndarray, proba: np.ndarray, requested: list[str] | None, *,
                       seconds: dict[str, float], communication: dict[str, Any], began: float) -> Path:
    d = node.config.data
    own = [str(i) for i in ids]
    by_id = dict(zip(own, range(len(own)), strict=True))
    wanted = requested if requested is not None else own
    rows = [by_id.get(i) for i in wanted]
    columns: dict[str, Any] = {d.id_column: wanted}
    values = np.asarray(proba)
    if values.ndim == 2:  # one probability per class
        for k in range(values.shape[1]):
            columns[f"probability_{k}"] = [float(values[r, k]) if r is not None else None for r in rows]
    else:
        columns["probability"] = [float(values[r]) if r is not None else None for r in rows]
    columns["status"] = ["scored" if r is not None else f"unknown to {node.name}" for r in rows]
    out = pd.DataFrame(columns)
    path = job.folder / "predictions.csv"
    write_atomic(path, out.to_csv(index=False).encode())
    seconds = {**seconds, "total": round(time.perf_counter() - began, 4)}
    summary = {"run_id": node.config.output.run_id, "party": node.name, "job": job.id,
               "schedule": node.settings.describe(),
               "counts": {k: int(v) for k, v in out["status"].value_counts().items()}, "seconds": seconds,
               "communication": communication}
    write_atomic(job.folder / "predict.json", (strict_json.dumps(summary, indent=2) + "\n").encode())
    log.info("predictions: %s", summary["counts"])
    return path


def serve_predictions(node: Any, banks: Sequence[str] | None = None, *, channels: Any = None,
                      job: PredictJob | None = None) -> Path:
    """The server answers ``banks`` (default: every client) until each has scored its rows; ``predict.json`` in
    the folder of ``job`` (default: a new job)."""
    from vsplit.horizontal.machines import Hub
    from vsplit.horizontal.predict import ScoreServer

    if not node.is_server:
        raise ConfigError(f"{node.name}: the federated server holds no segment; only the server and the banks "
                          "run `vsplit predict`")
    if node.settings.kind == "fedavg":
        raise ConfigError(f"{node.name}: in FedAvg every bank holds the whole model and scores alone; the server "
                          "has nothing to serve")
    banks = list(banks) if banks else list(node.h.clients)
    unknown = [b for b in banks if b not in node.h.clients]
    if unknown:
        raise ConfigError(f"--banks: {unknown} are not clients of this split; its clients are {list(node.h.clients)}")
    job = job if job is not None else PredictJob.open(node.folder)
    load_own_model(node)
    _, server, _ = _parts(node)
    width = node.config.model.embedding_width

    def forward(values: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return _run(node.modules, server, torch.from_numpy(values)).numpy()

    started = time.perf_counter()
    channels = dict(channels) if channels is not None else _listen(node, banks)
    rows, stats = _exchange(node, channels, Hub({b: ScoreServer(forward, width=width) for b in banks}))
    summary = {"run_id": node.config.output.run_id, "party": node.name, "job": job.id,
               "schedule": node.settings.describe(), "rows_scored": {b: int(n) for b, n in rows.items()},
               "seconds": round(time.perf_counter() - started, 3), "communication": stats}
    path = job.folder / "predict.json"
    write_atomic(path, (strict_json.dumps(summary, indent=2) + "\n").encode())
    return path


def _exchange(node: Any, channels: dict[str, Any], machine: Any) -> tuple[Any, dict[str, Any]]:
    """Run ``machine`` over ``channels`` (closed after; the peers told a code on failure); its result and the
    pump's traffic."""
    pump = Pump(node.name, channels, session=session_id(node.config.output.run_id + ":predict"),
                timeout=node.config.network.read_timeout_s)
    try:
        result = pump.run(machine)
    except BaseException as exc:
        pump.fail(exc)
        raise
    finally:
        for channel in channels.values():
            channel.close()
    return result, pump.stats.as_dict()


def _credentials(node: Any, peers: Sequence[str]) -> Any:
    from vsplit.transport.pinning import Credentials

    net = node.config.network
    return Credentials.load(node.name, peers={p: resolve(node.config, net.peers[p]) for p in peers},
                            own_cert=resolve(node.config, net.cert), own_key=resolve(node.config, net.key))


def _options(node: Any) -> Any:
    from vsplit.transport.stream import ChannelOptions

    return ChannelOptions(max_frame=node.config.network.max_frame_mb << 20)


def _dial_server(node: Any) -> dict[str, Any]:
    from vsplit.runtime.horizontal_node import _address
    from vsplit.transport.connect import dial

    net, server = node.config.network, node.h.server
    if not net.dial:
        raise ConfigError("network.dial: a bank dials the server; set e.g. dial = \"server.example:7700\"")
    return {server: dial(_credentials(node, [server]), peer=server, address=_address(net.dial),
                         deadline_s=net.connect_timeout_s, options=_options(node))}


def _listen(node: Any, banks: Sequence[str]) -> dict[str, Any]:
    from vsplit.runtime.horizontal_node import _address
    from vsplit.transport.connect import Listener

    net = node.config.network
    if not net.listen:
        raise ConfigError("network.listen: the server listens for the banks; set e.g. listen = \"0.0.0.0:7700\"")
    with Listener(_credentials(node, banks), address=_address(net.listen), options=_options(node)) as listener:
        return dict(listener.accept_all(deadline_s=net.connect_timeout_s))
