"""The exact method's steps of :class:`~vsplit.explain.machine.ExplainMachine`: every row's own path points.

Theory of operation. Forward, a segment takes its inputs at their knots (a source segment: the ends of its rows'
paths), adds its own breakpoints (:func:`~vsplit.explain.knots.refine`) and sends its output at its knots across
each cut (:class:`~vsplit.explain.messages.KnotActivations`); the coordinator's loss segment, having every knot of
every party in its own, seeds the backward pass with each piece's length on the score. Backward, a segment with the
gradient of its output integrated over each of its pieces runs once at the pieces' midpoints (its input there is
the interpolation of its input's knots: exact, as the input is affine on every piece), and sums the resulting input
gradients into the pieces of each input (:func:`~vsplit.explain.knots.gather_pieces`), which go back across the cut
(:class:`~vsplit.explain.messages.PieceGradients`). A source segment turns its per-piece gradients into attributions
exactly as the quadrature does, with the pieces' lengths in place of the quadrature weights.

Everything runs in float64, on a float64 copy of each segment, and crosses the cuts in float64: the attributions of
a row then sum to ``F(x) - F(b)`` up to float64 rounding.
"""

from __future__ import annotations

import copy
from functools import reduce
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.errors import ProtocolError
from vsplit.explain.knots import KnotLimit, Knots, gather_pieces, interpolate, refine
from vsplit.explain.messages import KnotActivations, PieceGradients
from vsplit.explain.paths import SourcePath, by_column
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing

Inputs = list[tuple[str, Knots, torch.Tensor]]


def call(module: nn.Module, names: list[str], tensors: list[torch.Tensor]) -> Any:
    """Run a segment on its inputs as the engine does (one tensor alone, several by name)."""
    return module(tensors[0]) if len(tensors) == 1 else module(dict(zip(names, tensors, strict=True)))


class ExactSteps:
    """Mixed into :class:`~vsplit.explain.machine.ExplainMachine`: its forward and backward steps for
    ``method="exact"`` (the attributes it uses are the machine's)."""

    name: str
    topology: Any
    segments: list[Any]
    sources: dict[str, Any]
    modules: dict[str, nn.Module]
    output: int
    _current: int
    _chunk_state: dict[str, Any]
    _inbox: dict[Any, Any]
    _scores: list[np.ndarray]
    _knot_counts: list[np.ndarray]
    _float64: dict[str, nn.Module]
    chunk: int

    def _exact_modules(self) -> dict[str, nn.Module]:
        return {name: copy.deepcopy(module).double().eval() for name, module in self.modules.items()}

    def _rows_of(self, chunk: int) -> int:  # pragma: no cover - the machine's
        raise NotImplementedError

    def _seed_scores(self, value: torch.Tensor, knots: Knots) -> torch.Tensor:  # pragma: no cover - the machine's
        raise NotImplementedError

    # -- forward -----------------------------------------------------------------------------------------------------
    def _forward_exact(self, out: list[Outgoing]) -> None:
        st = self._chunk_state
        rows = self._rows_of(self._current)
        lo = self._current * self.chunk
        for seg in self.segments:
            if seg.name in st["fwd"]:
                continue
            module = self._float64[seg.name]
            try:
                if seg.is_source:
                    source = self.sources[seg.name]
                    inputs = [t[lo:lo + rows] for t in source.inputs]
                    st["rows_in"][seg.name] = inputs

                    def evaluate(alphas: np.ndarray, at: np.ndarray, m: nn.Module = module, i: list = inputs,
                                 s: Any = source) -> torch.Tensor:
                        return SourcePath(m, i, s.baseline, alphas, at, dtype=torch.float64).output

                    knots, value = refine(evaluate, module, Knots.ends(rows))
                else:
                    ins = self._exact_inputs(seg, rows)
                    if ins is None:
                        continue
                    st["ins"][seg.name] = ins
                    names = [n for n, _, _ in ins]

                    def evaluate(alphas: np.ndarray, at: np.ndarray, m: nn.Module = module, i: Inputs = ins,
                                 n: list = names) -> torch.Tensor:
                        return call(m, n, [interpolate(ki, vi, alphas, at) for _, ki, vi in i])

                    knots, value = refine(evaluate, module, reduce(Knots.union, [k for _, k, _ in ins]))
            except KnotLimit as error:
                raise ProtocolError(f"{self.name}: segment {seg.name!r}: {error}", local=True,
                                    code=AbortCode.CONFIG_MISMATCH) from error
            if not isinstance(value, torch.Tensor):
                raise ProtocolError(f"{self.name}: explain needs segment {seg.name!r} to return one tensor",
                                    local=True)
            st["outs"][seg.name], st["knots"][seg.name] = value, knots
            st["fwd"].add(seg.name)
            for cut in self.topology.cuts:
                if cut.src == seg.name:
                    out.append(Outgoing(cut.dst, KnotActivations(
                        cut=cut.id, chunk=self._current, counts=knots.counts.astype(np.int32),
                        alphas=knots.alphas, values=np.ascontiguousarray(value.numpy(), dtype=np.float64))))
            if seg.loss:
                st["seed"] = self._seed_scores(value, knots)
                self._knot_counts.append(knots.counts.copy())

    def _exact_inputs(self, seg: Any, rows: int) -> Inputs | None:
        """Each input of ``seg`` as ``(name, knots, values)``, or ``None`` while one has not arrived."""
        st = self._chunk_state
        found: Inputs = []
        for name in seg.inputs:
            if name in st["outs"] and self.topology.segment(name).owner == self.name:
                found.append((name, st["knots"][name], st["outs"][name]))
                continue
            cut = next((c for c in self.topology.cuts if c.src == name and c.dst == self.name), None)
            if cut is None:
                return None
            key = ("leaf", cut.id)
            if key not in st:
                msg = self._inbox.pop(("act", cut.id, self._current), None)
                if msg is None:
                    return None
                width = tuple(cut.shapes[0])
                if len(msg.counts) != rows or tuple(msg.values.shape[1:]) != width:
                    raise ProtocolError(f"{self.name}: {cut.src_owner!r} sent knot activations for "
                                        f"{len(msg.counts)} rows of width {msg.values.shape[1:]} on cut c{cut.id}, "
                                        f"expected {rows} rows of width {width}")
                st[key] = (Knots.from_counts(msg.alphas, msg.counts), torch.from_numpy(msg.values))
            found.append((name, *st[key]))
        return found

    # -- backward ----------------------------------------------------------------------------------------------------
    def _piece_grad(self, seg: Any, values: np.ndarray, cut: Any) -> torch.Tensor:
        st = self._chunk_state
        knots = st["knots"][seg.name]
        expected = (len(knots.alphas) - knots.n, *st["outs"][seg.name].shape[1:])
        if values.shape != expected:
            raise ProtocolError(f"{self.name}: {cut.dst!r} sent piece gradients of shape {values.shape} on cut "
                                f"c{cut.id}, expected {expected}")
        return torch.from_numpy(values)

    def _run_backward_exact(self, seg: Any, grad: torch.Tensor) -> None:
        st = self._chunk_state
        knots = st["knots"][seg.name]
        mid, rows = knots.midpoints()
        module = self._float64[seg.name]
        if seg.is_source:
            source = self.sources[seg.name]
            path = SourcePath(module, st["rows_in"][seg.name], source.baseline, mid, rows, dtype=torch.float64)
            names, merged = by_column(path.attributions(grad).numpy(), source.columns)
            st.setdefault("attributions", []).append((names, merged))
            return
        ins = st["ins"][seg.name]
        leaves = [interpolate(k, v, mid, rows).requires_grad_() for _, k, v in ins]
        with torch.enable_grad():
            value = call(module, [n for n, _, _ in ins], leaves)
            grads = torch.autograd.grad(value, leaves, grad_outputs=grad, allow_unused=True)
        for (name, k, _), leaf, g in zip(ins, leaves, grads, strict=True):
            g = gather_pieces(knots, k, torch.zeros_like(leaf) if g is None else g)
            bucket = "acc" if self.topology.segment(name).owner == self.name else "cut_grads"
            st[bucket][name] = st[bucket][name] + g if name in st[bucket] else g

    def _gradient_message(self, cut: Any, values: torch.Tensor) -> PieceGradients:
        return PieceGradients(cut=cut.id, chunk=self._current,
                              values=np.ascontiguousarray(values.detach().numpy(), dtype=np.float64))
