"""A small trained three-party run (bank, shop, telco) for the serving tests, made in one process in seconds.

Training and batch prediction run the parties' nodes in threads over memory channels: the same ``PartyNode`` code
``vsplit train`` and ``vsplit predict`` run over mutual TLS (tests/test_three_parties.py checks they agree).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pandas as pd
from _pilot_support import free_port
from _plain import PLAIN_SET
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.config import load_config, resolve
from vsplit.transport.memory import memory_pair

TRAIN = "[train]\nepochs = 1\nbatch_size = 256\npatience = 100\nseed = {seed}\n"


def in_threads_with_errors(work: dict, *, timeout: float = 300) -> tuple[dict, dict]:
    """Each party's ``work`` in its own thread: the results and the exceptions raised, by party."""
    results, errors = {}, {}

    def run(party: str) -> None:
        try:
            results[party] = work[party]()
        except BaseException as exc:  # handed to the caller
            errors[party] = exc

    threads = [threading.Thread(target=run, args=(p,)) for p in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return results, errors


def _in_threads(work: dict) -> dict:
    results, errors = in_threads_with_errors(work)
    if errors:
        raise next(iter(errors.values()))
    return results


def _channels() -> dict[str, dict]:
    links = {p: memory_pair() for p in PARTNERS}
    channels = {"bank": {p: hub for p, (hub, _) in links.items()}}
    channels.update({p: {"bank": end} for p, (_, end) in links.items()})
    return channels


def shrink(root: Path, *, keep: int = 1200) -> None:
    """Keep about ``keep`` training rows of every party (the same customers everywhere, by ID): seconds to train."""
    tables = {p: pd.read_parquet(root / p / "data" / "train.parquet") for p in COLUMNS}
    ids = sorted(tables["bank"]["customer_id"].astype(str))[:keep]
    wanted = set(ids)
    for p, table in tables.items():
        table[table["customer_id"].astype(str).isin(wanted) | (table.index % 10 == 0)].to_parquet(
            root / p / "data" / "train.parquet", index=False)


def train_run(root: Path, run_id: str, *, seed: int = 0) -> None:
    """Train run ``run_id`` of the parties under ``root`` (configs written on first use), in one process."""
    from vsplit.node import PartyNode

    if not (root / "bank" / "party.toml").exists():
        prepare_three_parties(root, port=free_port(), run_id=run_id, extra=TRAIN.format(seed=seed))
        shrink(root)
    # the plain network: serving's numpy fast path covers it; the saved model records it, so serving and batch
    # prediction rebuild it without these overrides
    overrides = [*PLAIN_SET, f"output.run_id={run_id}", f"train.seed={seed}", 'data.test_path=""']
    nodes = {p: PartyNode(load_config(root / p / "party.toml", overrides=overrides), progress=False)
             for p in COLUMNS}
    channels = _channels()
    _in_threads({p: (lambda p=p: nodes[p].run(channels[p])) for p in COLUMNS})


def batch_predict(root: Path, run_id: str) -> pd.DataFrame:
    """``vsplit predict``'s predictions.csv of every bank test customer (each party's test table as input)."""
    from vsplit.node import PartyNode

    configs = {p: load_config(root / p / "party.toml", overrides=[f"output.run_id={run_id}"]) for p in COLUMNS}
    nodes = {p: PartyNode(c, progress=False) for p, c in configs.items()}
    channels = _channels()
    paths = _in_threads({p: (lambda p=p: nodes[p].predict(resolve(configs[p], "data/test.parquet"),
                                                          channels=channels[p])) for p in COLUMNS})
    return pd.read_csv(paths["bank"], dtype={"customer_id": str})


class Tap:
    """A channel that records every frame it sends (the frames a party puts on the wire, for privacy checks)."""

    def __init__(self, channel) -> None:
        self.channel, self.frames = channel, []

    def send(self, frame) -> None:
        self.frames.append(bytes(frame))
        self.channel.send(frame)

    def recv(self, timeout):
        return self.channel.recv(timeout)

    def close(self) -> None:
        self.channel.close()


def quietly(serve, channel) -> None:
    """Run a partner daemon's ``serve(channel)`` until the test closes the link."""
    from vsplit.errors import TransportError

    try:
        serve(channel)
    except TransportError:  # the test closed the link
        pass


def joined_in_memory(bank: Path, partners: dict[str, Path], overrides: list[str]) -> tuple[Any, dict, dict]:
    """The bank's scorer (config ``bank``) and every partner's daemon (``partners``: name -> config) joined in this
    process over memory links, each with ``overrides``; every frame each side sends is tapped: ``(scorer, {partner:
    (bank's tap, partner's tap)}, {partner: daemon})``."""
    from vsplit.serve.links import PartnerLink
    from vsplit.serve.partner import PartnerDaemon
    from vsplit.serve.scorer import Scorer
    from vsplit.serve.wire import Wire, serve_session

    scorer = Scorer(load_config(bank, overrides=overrides))
    taps, daemons = {}, {}
    for p, config in partners.items():
        hub, end = memory_pair()
        taps[p] = (Tap(hub), Tap(end))
        daemons[p] = PartnerDaemon(load_config(config, overrides=overrides))
        threading.Thread(target=quietly, args=(daemons[p].serve, taps[p][1]), daemon=True).start()
        wire = Wire(taps[p][0], peer=p, session=serve_session("bank", p))
        wire.send(scorer.admit(wire.recv(10)))
        scorer.connected(PartnerLink(wire, on_message=scorer.on_message))
    return scorer, taps, daemons


def close_joined(taps: dict, daemons: dict) -> None:
    """Close what :func:`joined_in_memory` opened: every daemon and both ends of every link."""
    for daemon in daemons.values():
        daemon.close()
    for tap, other in taps.values():
        tap.close()
        other.close()


class ServeProcesses:
    """The serve processes of one test (the bank's HTTP service and the partners' daemons): a subclass's ``start``
    builds each party's command and calls :meth:`launch`."""

    def __init__(self, root: Path, *, http: int, link: int) -> None:
        self.root, self.http, self.link = root, http, link
        self.procs: dict[str, Any] = {}
        self.logs: dict[str, Path] = {}

    def launch(self, party: str, args: list[str], sets: list[str]) -> None:
        """Start ``vsplit <args> --set <each of sets>`` for ``party``, logged to its own file."""
        from _pilot_support import start

        for item in sets:
            args = [*args, "--set", item]
        self.logs[party] = self.root / f"{party}-serve-{len(self.logs)}.log"
        self.procs[party] = start(args, log=self.logs[party])

    def wait_ready(self, client: Any, *, timeout: float = 90) -> dict:
        """The bank's ``/healthz`` once it answers 200 (every process still running meanwhile)."""
        import time

        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                assert proc.poll() is None, f"{name} exited:\n{self.logs[name].read_text()[-3000:]}"
            try:
                reply = client.get("/healthz")
                if reply.status_code == 200:
                    return reply.json()
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError("not ready: " + "\n".join(f"{n}: {p.read_text()[-1500:]}" for n, p in self.logs.items()))

    def stop(self, party: str) -> int:
        """SIGTERM ``party``'s process; its exit code."""
        import signal

        proc = self.procs.pop(party)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=30)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(timeout=10)


def explain_reasons(config_path: Path, table: pd.DataFrame, k: int) -> dict[str, dict]:
    """``vsplit explain``'s reason codes (``k`` at most) of every applicant in its explanations.csv ``table``,
    declined or not, by applicant ID: what ``/v1/score`` must answer with ``"reasons": k``."""
    from vsplit.explain.explanation import GROUP_PREFIX, Explanation
    from vsplit.explain.reasons import reason_codes, reasons_json

    config = load_config(config_path)
    table = table.set_index("customer_id")
    groups = [c for c in table.columns if c.startswith(GROUP_PREFIX)]
    own = [c for c in table.columns if c not in {*groups, "score", "baseline_score", "probability",
                                                 "baseline_probability"}]
    explanation = Explanation(label_party="bank", ids=list(table.index), score=table["score"].to_numpy(),
                              baseline_score=table["baseline_score"].to_numpy(), features=table[own],
                              groups=table[groups].rename(columns=lambda c: c[len(GROUP_PREFIX):]))
    ex = config.explain
    codes = reason_codes(explanation, n=k, texts=ex.texts, decline_when=ex.decline_when, threshold=ex.threshold,
                         declined_only=False)
    return {r["id"]: r for r in reasons_json(codes)}
