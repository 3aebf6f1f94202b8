"""Prometheus-style counters and latency histograms, rendered in the text exposition format at ``/metrics``.

Small on purpose (no dependency): counters and histograms with labels, thread-safe, and :meth:`Metrics.render`.

Example:
    >>> metrics = Metrics()
    >>> metrics.count("vsplit_serve_requests_total", path="/v1/score", status="200")
    >>> metrics.observe("vsplit_serve_request_seconds", 0.003, path="/v1/score")
    >>> text = metrics.render()
    >>> 'vsplit_serve_requests_total{path="/v1/score",status="200"} 1' in text
    True
    >>> 'vsplit_serve_request_seconds_bucket{le="0.005",path="/v1/score"} 1' in text
    True
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable

#: latency buckets in seconds: 0.5 ms to 10 s
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: batch-size buckets (rows per micro-batch)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)

HELP = {
    "vsplit_serve_requests_total": ("counter", "HTTP requests by path and status"),
    "vsplit_serve_scores_total": ("counter", "rows scored, by the model that answered (split, bank_only, none)"),
    "vsplit_serve_request_seconds": ("histogram", "HTTP request latency by path"),
    "vsplit_serve_batch_rows": ("histogram", "rows per micro-batch"),
    "vsplit_serve_partner_down_total": ("counter", "batches that found a partner down, by partner"),
    "vsplit_serve_rejected_total": ("counter", "requests refused before scoring, by reason"),
}


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters and histograms by name and labels; gauges are read at render time from callbacks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple, float]] = {}
        self._histograms: dict[str, dict[tuple, list[float]]] = {}
        self._bounds: dict[str, tuple[float, ...]] = {}
        self._gauges: dict[str, tuple[str, Callable[[], dict[tuple, float]]]] = {}

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._counters.setdefault(name, {})
            series[key] = series.get(key, 0.0) + value

    def observe(self, name: str, value: float, *, bounds: tuple[float, ...] = BUCKETS, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._bounds.setdefault(name, bounds)
            series = self._histograms.setdefault(name, {})
            cells = series.get(key)
            if cells is None:
                cells = series[key] = [0.0] * (len(bounds) + 3)  # per bucket, +Inf, sum, count
            cells[bisect.bisect_left(bounds, value)] += 1
            cells[-2] += value
            cells[-1] += 1

    def gauge(self, name: str, text: str, read: Callable[[], dict[tuple, float]]) -> None:
        """A gauge read at render time: ``read()`` maps label tuples (``(("party", "shop"),)``) to values."""
        self._gauges[name] = (text, read)

    def value(self, name: str, **labels: str) -> float:
        """A counter's current value (0 if never counted)."""
        with self._lock:
            return self._counters.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, series in sorted(self._counters.items()):
                _, text = HELP.get(name, ("counter", name))
                lines += [f"# HELP {name} {text}", f"# TYPE {name} counter"]
                lines += [f"{name}{_labels(dict(k))} {v:g}" for k, v in sorted(series.items())]
            for name, series in sorted(self._histograms.items()):
                _, text = HELP.get(name, ("histogram", name))
                bounds = self._bounds[name]
                lines += [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
                for key, cells in sorted(series.items()):
                    labels = dict(key)
                    running = 0.0
                    for bound, n in zip((*bounds, float("inf")), cells[: len(bounds) + 1], strict=True):
                        running += n
                        le = "+Inf" if bound == float("inf") else f"{bound:g}"
                        lines.append(f"{name}_bucket{_labels({**labels, 'le': le})} {running:g}")
                    lines.append(f"{name}_sum{_labels(labels)} {cells[-2]:.6g}")
                    lines.append(f"{name}_count{_labels(labels)} {cells[-1]:g}")
        for name, (text, read) in sorted(self._gauges.items()):
            lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
            lines += [f"{name}{_labels(dict(k))} {v:g}" for k, v in sorted(read().items())]
        return "\n".join(lines) + "\n"
