"""What one party's console shows, held in its own process: :class:`ConsoleState`.

Theory of operation. The party's process already tracks everything the console shows: its channels (each peer's
certificate fingerprint and, for resumable channels, ``up``/``down``/``lost``/``done``), its pump (the machine it
runs now and the frames and bytes per peer and message type, :class:`~vsplit.runtime.stats.CommStats`), the
training machine (epoch, the chosen epoch) and its progress callbacks (loss per step, the validation record per
epoch), the client's detectors, its checkpoint folder and, for a service, its metrics and partner status. A
:class:`ConsoleState` is handed references to those objects (:meth:`watch_run`, :meth:`watch_service`) and reads
them only when the console asks (:meth:`snapshot`) or when its sampler ticks (:meth:`sample`, twice a second, in the
console's own thread): nothing is copied on the training path but two numbers per step (:meth:`on_step`) and one
record per epoch (:meth:`on_epoch`).

It shows what the party already knows and nothing more: its own name, role and topology, its peers' names and
fingerprints (what ``peers.json`` records), its own traffic counts, its own losses and metrics (a partner gets
none: the training callbacks run at the label party only), its own files. No row, ID or value of a peer ever reaches
it.

Example:
    >>> state = ConsoleState(party="bank", role="label", topology="vertical", run_id="r1")
    >>> state.on_step(0, 0, 2, 0.70); state.on_step(0, 1, 2, 0.60); state.sample(now=1.0)
    >>> state.on_epoch({"epoch": 0, "train_loss": 0.65, "val_auc": 0.71})
    >>> snap = state.snapshot()
    >>> snap["training"]["loss"], snap["training"]["history"][0]["val_auc"]
    ([[2, 0.65]], 0.71)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

#: points kept per live series (older ones are thinned to every other point)
MAX_POINTS = 2000
#: what a resumable channel's state is called on the page
CONNECTION = {"up": "connected", "down": "reconnecting", "lost": "gone", "done": "closed"}


class ConsoleState:
    """One party's live state for its console (see the module docstring); thread-safe to read."""

    def __init__(self, *, party: str, role: str, topology: str, run_id: str = "", mode: str = "train",
                 folder: Path | None = None) -> None:
        self.identity = {"party": party, "role": role, "topology": topology, "run_id": run_id, "mode": mode}
        self.folder = folder
        self.started = time.time()
        self.status = "starting"
        self.error = ""
        self._lock = threading.Lock()
        self._peers: dict[str, dict[str, Any]] = {}
        self._channels: Mapping[str, Any] = {}
        self._pump: Any = None
        self._detectors: Any = None
        self._service: Any = None
        self._progress: Callable[[], Mapping[str, Any]] | None = None
        self._steps = [0, 0.0, 0, 0]  # count, loss sum, epoch, steps per epoch: written per step, read by sample()
        self._taken = (0, 0.0)
        self._loss: list[list[float]] = []
        self._history: list[dict[str, Any]] = []
        self._rates: list[list[float]] = []
        self._last_requests: tuple[float, float] | None = None
        self._finished: dict[str, Any] = {}

    # -- what the party's process hands over -------------------------------------------------------------------------
    def expect_peers(self, peers: Mapping[str, str | None]) -> None:
        """The peers this party will reach, ``name -> fingerprint`` (or None), all ``waiting`` until connected."""
        now = time.time()
        with self._lock:
            for name, fingerprint in peers.items():
                self._peers.setdefault(name, {"name": name, "fingerprint": fingerprint, "state": "waiting",
                                              "history": [[now, "waiting"]]})

    def watch_run(self, *, channels: Mapping[str, Any], pump: Any) -> None:
        """The run's open channels and its pump: read at each :meth:`sample`."""
        with self._lock:
            self._channels, self._pump, self.status = channels, pump, "running"
        self.sample()

    def watch_detectors(self, detectors: Any) -> None:
        """A client's detectors (:class:`~vsplit.privacy.detectors.client.ClientDetectors`), read when asked."""
        self._detectors = detectors

    def watch_progress(self, read: Callable[[], Mapping[str, Any]]) -> None:
        """A model trained in trees or steps rather than epochs (boosting, a scorecard): ``read()`` says, when the
        console asks, ``unit`` (``"trees"``, ``"steps"``), ``done``, ``total`` and, where the party has one, ``loss``
        (``[[x, y], ...]``, e.g. the held-out log loss per tree) with its ``loss_name``. It must only read the
        machine (the console's thread calls it while the party's thread trains).

        >>> state = ConsoleState(party="bank", role="label", topology="vertical")
        >>> state.watch_progress(lambda: {"unit": "trees", "done": 2, "total": 5, "loss": [[1, 0.6], [2, 0.5]],
        ...                               "loss_name": "held-out log loss"})
        >>> t = state.snapshot()["training"]; t["done"], t["loss_x"], t["loss"][-1]
        (2, 'trees', [2, 0.5])
        """
        self._progress = read

    def watch_service(self, service: Any) -> None:
        """A running service: the bank's ``BankService`` (its ``status()`` and ``metrics``) or a partner's daemon."""
        with self._lock:
            self._service, self.status = service, "serving"
        self.sample()

    def finished(self, *, error: BaseException | None = None, summary: Mapping[str, Any] | None = None) -> None:
        """The run ended (``error``: how it failed, its type and message as the party's own log has them)."""
        self.sample()
        with self._lock:
            self.status = "failed" if error is not None else "done"
            self.error = "" if error is None else f"{type(error).__name__}: {error}"
            self._finished = dict(summary or {})
            now = time.time()
            for peer in self._peers.values():
                if peer["state"] in ("connected", "waiting", "reconnecting"):
                    self._move(peer, "closed", now)

    # -- training callbacks (the label party's training machine calls them) ------------------------------------------
    def on_step(self, epoch: int, step: int, steps: int, loss: float) -> None:
        s = self._steps
        s[0] += 1
        s[1] += loss
        s[2], s[3] = epoch, steps

    def on_epoch(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._history.append(dict(record))

    # -- reading -----------------------------------------------------------------------------------------------------
    def sample(self, *, now: float | None = None) -> None:
        """Read the watched objects once: peers' connection states, the loss since the last sample, the service's
        request rate (the console's sampler calls this twice a second)."""
        now = time.time() if now is None else now
        with self._lock:
            count, total = self._steps[0], self._steps[1]
            taken_count, taken_total = self._taken
            if count > taken_count:  # x: steps trained so far; y: the mean loss of the steps since the last sample
                self._append(self._loss, [count, round((total - taken_total) / (count - taken_count), 6)])
                self._taken = (count, total)
            for name, channel in list(self._channels.items()):
                self._see_channel(name, channel, now)
            if self._pump is not None:
                for name in getattr(self._pump, "lost", ()):
                    self._move(self._peer(name), "gone", now)
            if self._service is not None:
                self._see_service(now)

    def _see_channel(self, name: str, channel: Any, now: float) -> None:
        peer = self._peer(name)
        fingerprint = getattr(channel, "peer_fingerprint", None)
        if fingerprint:
            peer["fingerprint"] = fingerprint
        raw = getattr(channel, "state", None)
        if raw is None:  # a plain TLS channel: connected until it closes (cleanly: done) or ends otherwise (lost)
            closed = name in getattr(self._pump, "closed", ())
            raw = "done" if closed else "lost" if getattr(channel, "ended", False) else "up"
        self._move(peer, CONNECTION.get(raw, raw), now)

    def _see_service(self, now: float) -> None:
        status = _call(getattr(self._service, "status", None)) or {}
        partners = status.get("partners") or {}
        bank = getattr(self._service, "bank", None)
        if bank is not None:  # a partner's daemon: its one link to the bank, dialed again whenever it drops
            wire = getattr(self._service, "wire", None)
            up = wire is not None and not getattr(wire.channel, "ended", True)
            partners = {bank: "connected" if up else "down"}
            if up and getattr(wire.channel, "peer_fingerprint", None):
                self._peer(bank)["fingerprint"] = wire.channel.peer_fingerprint
        for name, state in partners.items():
            self._move(self._peer(name), {"down": "reconnecting", "syncing": "connected",
                                          "cached": "reconnecting"}.get(state, state), now)
        for name, link in list(getattr(getattr(self._service, "scorer", None), "links", {}).items()):
            fingerprint = getattr(getattr(getattr(link, "wire", None), "channel", None), "peer_fingerprint", None)
            if fingerprint:
                self._peer(name)["fingerprint"] = fingerprint
        metrics = getattr(self._service, "metrics", None)
        if metrics is not None:
            requests = service_requests(metrics.render())
            if self._last_requests is not None and now > self._last_requests[0]:
                rate = (requests - self._last_requests[1]) / (now - self._last_requests[0])
                self._append(self._rates, [round(now, 3), round(max(rate, 0.0), 3)])
            self._last_requests = (now, requests)

    def _peer(self, name: str) -> dict[str, Any]:
        peer = self._peers.get(name)
        if peer is None:
            peer = self._peers[name] = {"name": name, "fingerprint": None, "state": "waiting", "history": []}
        return peer

    @staticmethod
    def _move(peer: dict[str, Any], state: str, now: float) -> None:
        if peer["state"] != state or not peer["history"]:
            peer["state"] = state
            peer["history"].append([round(now, 3), state])

    @staticmethod
    def _append(series: list[list[float]], point: list[float]) -> None:
        series.append(point)
        if len(series) > MAX_POINTS:
            del series[1::2]

    def snapshot(self) -> dict[str, Any]:
        """Everything the console shows now, as JSON-ready data."""
        with self._lock:
            out: dict[str, Any] = {**self.identity, "status": self.status, "error": self.error,
                                   "started": round(self.started, 3), "now": round(time.time(), 3),
                                   "peers": [{**p, "history": [list(h) for h in p["history"]]}
                                             for p in self._peers.values()]}
            machine = getattr(self._pump, "machine", None)
            out["stage"] = "" if machine is None else "finishing" if getattr(machine, "done", False) and \
                self.status == "running" else stage_of(machine)
            out["training"] = self._training(machine)
            out["traffic"] = traffic(getattr(self._pump, "stats", None))
            out["detectors"] = detector_states(self._detectors)
            if self._service is not None:
                out["service"] = self._service_view()
            out["finished"] = dict(self._finished)
        out["checkpoints"] = checkpoints(self.folder)
        return out

    def _training(self, machine: Any) -> dict[str, Any]:
        training = getattr(machine, "training", None)
        plan = getattr(machine, "plan", None)
        running = machine is not None and plan is not None and not getattr(machine, "done", False)
        return {"epoch": getattr(machine, "epoch", None) if running else None,
                "epochs": getattr(plan, "epochs", None),
                "step": self._steps[0], "loss": [list(p) for p in self._loss], "loss_x": "step",
                "history": [dict(h) for h in self._history],
                "chosen_epoch": getattr(training, "best_epoch", None)} | self._progress_view()

    def _progress_view(self) -> dict[str, Any]:
        progress = _call(self._progress) if self._progress is not None else None
        if not progress:
            return {}
        unit = str(progress.get("unit", "steps"))
        view: dict[str, Any] = {"unit": unit, "done": progress.get("done"), "total": progress.get("total")}
        loss = progress.get("loss")
        if loss:
            view.update(loss=[list(p) for p in loss], loss_x=unit, loss_name=progress.get("loss_name", "loss"))
        return view

    def _service_view(self) -> dict[str, Any]:
        status = _call(getattr(self._service, "status", None)) or {}
        metrics = getattr(self._service, "metrics", None)
        view = {"version": status.get("version") or getattr(self._service, "default", None),
                "mode": status.get("mode") or getattr(self._service, "mode", None),
                "health": status.get("status"), "partners": status.get("partners") or {},
                "requests_per_s": [list(p) for p in self._rates]}
        if metrics is not None:
            view["latency_ms"] = latency_percentiles(metrics.render())
        return view


def _call(read: Callable[[], Any] | None) -> Any:
    try:
        return read() if read is not None else None
    except Exception:  # a service closing while it is read: nothing to show this time
        return None


def stage_of(machine: Any) -> str:
    """The stage a machine runs, from its module: ``psi``, ``binning``, ``training`` or its class name (a wrapper
    with an ``inner`` machine, such as a boosting run's per-tree checkpoints: its inner machine's stage).

    >>> class Partner: pass
    >>> Partner.__module__ = "vsplit.psi.partner"
    >>> stage_of(Partner())
    'psi'
    """
    inner = getattr(machine, "inner", None)
    if inner is not None and inner is not machine:
        return stage_of(inner)
    module = type(machine).__module__
    if ".psi." in module:
        return "psi"
    if ".woe." in module:
        return "binning"
    if any(f".{kind}." in module for kind in ("training", "boosting", "horizontal", "scorecard")):
        return "training"
    return type(machine).__name__


def traffic(stats: Any) -> list[dict[str, Any]]:
    """Frames and bytes per peer, direction and message type, from a :class:`~vsplit.runtime.stats.CommStats`.

    >>> from vsplit.runtime.stats import CommStats
    >>> s = CommStats(); s.record("sent", "partner", "Gradients", 10)
    >>> traffic(s)
    [{'peer': 'partner', 'direction': 'sent', 'type': 'Gradients', 'frames': 1, 'bytes': 10}]
    """
    if stats is None:
        return []
    for _ in range(3):  # the pump's thread may add a new key while this one reads: read again
        try:
            rows = stats.tallies()
            break
        except RuntimeError:
            continue
    else:
        return []
    return [{"peer": p, "direction": d, "type": k, "frames": f, "bytes": b} for d, p, k, f, b in sorted(rows)]


def detector_states(detectors: Any) -> list[dict[str, Any]]:
    """Each detector's name, batches judged, last statistic and whether (where) it fired."""
    out = []
    for d in getattr(detectors, "detectors", None) or ():
        last = d.history[-1] if d.history else None
        first = d.first
        out.append({"name": d.name, "batches": d.batches, "last": None if last is None else round(last.value, 6),
                    "fired": d.detected,
                    "where": None if first is None else {"epoch": first.epoch, "step": first.step,
                                                         "statistic": first.statistic, "threshold": first.threshold}})
    return out


def checkpoints(folder: Path | None) -> list[dict[str, Any]]:
    """The checkpoints in ``folder``/checkpoints: name, size, when written."""
    if folder is None or not (folder / "checkpoints").is_dir():
        return []
    out = []
    for path in sorted((folder / "checkpoints").glob("*.npz")):
        try:
            stat = path.stat()
        except OSError:  # removed while listed (only the newest three are kept)
            continue
        out.append({"name": path.name, "bytes": stat.st_size, "time": round(stat.st_mtime, 3)})
    return out


def service_requests(text: str) -> float:
    """All HTTP requests counted in a ``/metrics`` text (``vsplit_serve_requests_total``, every label).

    >>> service_requests('vsplit_serve_requests_total{path="/v1/score",status="200"} 3\\n'
    ...                  'vsplit_serve_requests_total{path="/healthz",status="200"} 2\\n')
    5.0
    """
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vsplit_serve_requests_total{"))


def latency_percentiles(text: str, *, path: str = "/v1/score") -> dict[str, float | None]:
    """p50, p90 and p99 in milliseconds of ``path``'s request latency, from a ``/metrics`` text's histogram (the
    upper bound of the bucket where each falls; None before any request).

    >>> text = ('vsplit_serve_request_seconds_bucket{le="0.001",path="/v1/score"} 90\\n'
    ...         'vsplit_serve_request_seconds_bucket{le="0.01",path="/v1/score"} 100\\n'
    ...         'vsplit_serve_request_seconds_bucket{le="+Inf",path="/v1/score"} 100\\n')
    >>> latency_percentiles(text)
    {'p50': 1.0, 'p90': 1.0, 'p99': 10.0}
    """
    marker = f'path="{path}"'
    cumulative = []
    for line in text.splitlines():
        if line.startswith("vsplit_serve_request_seconds_bucket{") and marker in line:
            le = line.split('le="', 1)[1].split('"', 1)[0]
            cumulative.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    total = cumulative[-1][1] if cumulative else 0.0
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        bound = next((b for b, n in cumulative if total and n >= q * total), None)
        out[name] = None if bound is None or bound == float("inf") else round(bound * 1000, 3)
    return out
