"""The front door: :func:`plan_cuts` captures a model's dataflow once and reports every candidate cut.

Example:
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    >>> plan = plan_cuts(net, (torch.randn(16, 8),))
    >>> [(row.after, row.values_forward, row.client_params) for row in plan.rows]
    [('(input)', 8, 0), ('0', 32, 288), ('1', 32, 288), ('2', 4, 420)]
    >>> plan.min_traffic().after, plan.min_traffic(allow_whole_model=True).after, plan.row("1").dominated
    ('0', '2', True)
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from vsplit.errors import ConfigError
from vsplit.plan.costs import Link, itemsize
from vsplit.plan.cuts import Cut, lifetimes, module_cuts, op_cuts, parameter_uses
from vsplit.plan.graph import Captured
from vsplit.plan.privacy import MIN_BATCH, centred_distances, distance_correlation, rows_of

log = logging.getLogger(__name__)

GRANULARITIES = ("module", "op")
METHODS = ("auto", "export", "record")


@dataclass
class CrossingTensor:
    """One tensor that crosses a cut."""

    producer: str  # call path of the module whose op made it, "(input i)" for the model's i-th input
    node: str  # the graph node that made it
    shape: list[int]  # at the example batch
    dtype: str
    values: int  # per sample (per batch when the tensor has no batch dimension)
    batched: bool
    gradient: bool  # whether a gradient comes back for it


@dataclass
class CutRow:
    """One candidate cut (all per-sample figures are per row of the batch)."""

    after: str
    position: int  # the client runs ops 0 .. position-1
    aliases: list[str]
    tensors: list[CrossingTensor]
    values_forward: int
    bytes_forward: int
    values_backward: int
    bytes_backward: int
    client_params: int
    server_params: int
    client_flops: int  # forward FLOPs per sample
    server_flops: int
    client_saved_bytes: int  # activation bytes per sample the client keeps for backward
    raw_input_crosses: bool
    shared_parameters: list[str]
    dominated: bool = False
    distance_correlation: float | None = None
    epoch_bytes: int | None = None
    epoch_seconds: float | None = None

    @property
    def traffic(self) -> int:
        return self.bytes_forward + self.bytes_backward


@dataclass
class CutPlan:
    """Every candidate cut of one model, and how to carry one out (:meth:`split`)."""

    model: str
    method: str
    capture_seconds: float
    batch: int
    rows: list[CutRow]
    dtype: str | None = None
    link: Link | None = None
    note: str = ""
    _captured: Captured | None = field(default=None, repr=False)
    _crossing: dict[int, list] = field(default_factory=dict, repr=False)

    def row(self, name: str) -> CutRow:
        """The row of a cut by module call path, alias or ``op:<index>``."""
        for row in self.rows:
            if name == row.after or name in row.aliases:
                return row
        names = [r.after for r in self.rows]
        raise ConfigError(f"no cut named {name!r}; the cuts of this plan are {names}")

    def _candidates(self, *, allow_raw_input: bool, allow_whole_model: bool) -> list[CutRow]:
        return [
            r for r in self.rows
            if (allow_raw_input or not r.raw_input_crosses)
            and (allow_whole_model or r.server_flops or r.server_params)
        ]

    def min_traffic(self, *, allow_raw_input: bool = False, allow_whole_model: bool = False) -> CutRow:
        """The cut that sends the fewest bytes both ways (fewest client FLOPs on ties).

        Cuts where the raw input crosses, and the cut after the last op (the whole model on the client, as for a
        vertical split's bottom model), count only when allowed.
        """
        candidates = self._candidates(allow_raw_input=allow_raw_input, allow_whole_model=allow_whole_model)
        return min(candidates or self.rows, key=lambda r: (r.traffic, r.client_flops, r.position))

    def best_under(
        self,
        *,
        max_client_flops: float | None = None,
        max_client_saved_bytes: float | None = None,
        max_client_params: float | None = None,
        allow_whole_model: bool = False,
    ) -> CutRow | None:
        """The least-traffic cut within the client's budgets (per sample; params in total), or None if none fits."""
        fits = [
            r for r in self._candidates(allow_raw_input=False, allow_whole_model=allow_whole_model)
            if (max_client_flops is None or r.client_flops <= max_client_flops)
            and (max_client_saved_bytes is None or r.client_saved_bytes <= max_client_saved_bytes)
            and (max_client_params is None or r.client_params <= max_client_params)
        ]
        return min(fits, key=lambda r: (r.traffic, r.client_flops, r.position)) if fits else None

    def split(self, name: str) -> tuple[torch.nn.Module, torch.nn.Module]:
        """The client and server halves of a cut (see :mod:`vsplit.plan.split`)."""
        from vsplit.plan.split import split_graph

        row = self.row(name)
        if self._captured is None:
            raise ConfigError("this plan was loaded without its graph; plan the model again to split it")
        return split_graph(self._captured, row.position, self._crossing[row.position])

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready Python values."""
        return {
            "model": self.model, "method": self.method, "capture_seconds": round(self.capture_seconds, 4),
            "batch": self.batch, "dtype": self.dtype, "link": self.link.to_dict() if self.link else None,
            "note": self.note, "rows": [asdict(r) for r in self.rows],
        }


def capture(model: torch.nn.Module, example_inputs: tuple, *, method: str = "auto") -> Captured:
    """The model's graph by ``torch.export`` (on a deep copy), or by recording one forward pass if export refuses."""
    from vsplit.plan.export import export_graph
    from vsplit.plan.record import record

    if method not in METHODS:
        raise ConfigError(f"unknown capture method {method!r}; use one of {list(METHODS)}")
    note = ""
    if method in ("auto", "export"):
        try:
            return export_graph(model, example_inputs)
        except Exception as exc:  # export refuses many real models; recording one pass is the fallback
            if method == "export":
                raise ConfigError(f"torch.export refused the model: {_first_line(exc)}; try method='record'") from exc
            note = f"torch.export refused ({type(exc).__name__}: {_first_line(exc)}); recorded one forward pass"
            log.info(note)
    try:
        captured = record(model, example_inputs)
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in example_inputs]
        raise ConfigError(
            f"the model rejected example inputs of shapes {shapes}: {_first_line(exc)}; "
            "pass inputs shaped (and typed) as its forward expects"
        ) from exc
    captured.note = note
    return captured


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def plan_cuts(
    model: torch.nn.Module,
    example_inputs: Any,
    *,
    granularity: str = "module",
    method: str = "auto",
    dtype: str | None = None,
    link: Link | None = None,
) -> CutPlan:
    """Every candidate cut of ``model`` on ``example_inputs`` (a tensor or a tuple of positional inputs).

    Args:
        granularity: ``"module"``: one cut per end of a module call; ``"op"``: one after every op.
        method: ``"auto"`` (export, else record), ``"export"`` or ``"record"``.
        dtype: cost floating crossing tensors as this dtype (e.g. ``"float16"``) instead of their own.
        link: also predict bytes and seconds of communication per epoch over this link.

    With a batch of at least 4 rows each row also gets the distance correlation of the inputs and what crosses.
    The user's model is never run or changed: both methods work on a deep copy.
    """
    if granularity not in GRANULARITIES:
        raise ConfigError(f"unknown granularity {granularity!r}; use one of {list(GRANULARITIES)}")
    if dtype is not None:
        itemsize(dtype)
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    captured = capture(model, inputs, method=method)
    cuts = module_cuts(captured) if granularity == "module" else op_cuts(captured)
    rows, crossing = _rows(captured, cuts, dtype=dtype, link=link)
    _mark_dominated(rows)
    return CutPlan(
        model=type(model).__name__, method=captured.method, capture_seconds=captured.seconds, batch=captured.batch,
        rows=rows, dtype=dtype, link=link, note=captured.note, _captured=captured, _crossing=crossing,
    )


def _bytes(tensor: torch.Tensor, dtype: str | None) -> int:
    if dtype is not None and tensor.is_floating_point():
        return itemsize(dtype)
    return tensor.element_size()


def _rows(
    captured: Captured, cuts: list[Cut], *, dtype: str | None, link: Link | None
) -> tuple[list[CutRow], dict[int, list]]:
    batch, ops = captured.batch, captured.ops
    life = lifetimes(captured)
    uses = parameter_uses(captured)
    numel = {name: p.numel() for name, p in captured.root.named_parameters()}
    inputs = {n: i for i, n in enumerate(captured.inputs())}
    flops = [0]
    for op in ops:
        flops.append(flops[-1] + op.flops)
    op_of = captured.op_of()
    x_rows = rows_of([captured.values[n] for n in inputs], batch) if batch >= MIN_BATCH else None
    x_centred = centred_distances(x_rows) if x_rows is not None else None
    rows, crossing, saved = [], {}, {}
    done = 0
    for cut in cuts:
        p = cut.position
        for op in ops[done:p]:
            saved.update(op.saved)
        done = max(done, p)
        nodes = [n for n, (made, last) in life.items() if made < p <= last]
        tensors = []
        for n in nodes:
            t = captured.values[n]
            batched = bool(t.dim() and t.shape[0] == batch)
            tensors.append(CrossingTensor(
                producer=f"(input {inputs[n]})" if n in inputs else ops[op_of[n]].module or "(model)",
                node=n.name, shape=list(t.shape), dtype=str(t.dtype).removeprefix("torch."),
                values=t.numel() // batch if batched else t.numel(), batched=batched,
                gradient=n not in inputs and captured.requires_grad.get(n, False),
            ))
        sizes = [t.values * _bytes(captured.values[n], dtype) for t, n in zip(tensors, nodes, strict=True)]
        row = CutRow(
            after=cut.after, position=p, aliases=list(cut.aliases), tensors=tensors,
            values_forward=sum(t.values for t in tensors), bytes_forward=sum(sizes),
            values_backward=sum(t.values for t in tensors if t.gradient),
            bytes_backward=sum(s for t, s in zip(tensors, sizes, strict=True) if t.gradient),
            client_params=sum(numel[k] for k, (first, _) in uses.items() if first < p),
            server_params=sum(numel[k] for k, (_, last) in uses.items() if last >= p),
            client_flops=flops[p] // batch, server_flops=(flops[-1] - flops[p]) // batch,
            client_saved_bytes=sum(saved.values()) // batch,
            raw_input_crosses=any(n in inputs for n in nodes),
            shared_parameters=sorted(k for k, (first, last) in uses.items() if first < p <= last),
        )
        if x_centred is not None:
            z_rows = rows_of([captured.values[n] for n in nodes], batch)
            row.distance_correlation = None if z_rows is None else round(distance_correlation(x_centred, z_rows), 4)
        if link is not None:
            row.epoch_bytes = link.epoch_bytes(forward=row.bytes_forward, backward=row.bytes_backward)
            row.epoch_seconds = round(link.epoch_seconds(forward=row.bytes_forward, backward=row.bytes_backward), 4)
        rows.append(row)
        crossing[p] = nodes
    return rows, crossing


def _mark_dominated(rows: list[CutRow]) -> None:
    """A cut is dominated when an earlier cut with the same client parameters sends no more bytes.

    Moving the parameter-free ops in between (an upsample, a concat, an activation) to the server then costs
    the client nothing and never raises the traffic.
    """
    for i, row in enumerate(rows):
        row.dominated = any(
            q.client_params == row.client_params and q.traffic <= row.traffic for q in rows[:i]
        )
