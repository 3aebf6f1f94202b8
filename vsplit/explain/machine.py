"""One sans-IO machine per party that explains a split model's score jointly: integrated gradients through the cuts.

Theory of operation. Every party runs its segments of the topology, one chunk of aligned rows at a time, on the
rows' integrated-gradients path (:mod:`vsplit.explain.paths`): a source segment on its owner's interpolated rows,
every other segment on what reaches it. Forward, the output of a segment before a cut crosses it
(:class:`~vsplit.explain.messages.PathActivations`); the coordinator (the label owner) computes the score at every
path point and seeds the backward pass with the quadrature weights; backward, each segment's output gradient is
complete once all its readers have run backward (its own) or sent it back (:class:`~vsplit.explain.messages.
PathGradients`), and each segment is one ``torch.autograd.grad`` call on its own graph. A source segment turns its
gradient into its owner's per-column attributions, which stay with the owner; a party with columns other than the
coordinator then sends one number per row, its group's attribution, and the names of its top-k columns if its
config allows (:class:`~vsplit.explain.messages.GroupAttribution`).

With ``method="exact"`` the path points are each row's own breakpoints and the messages carry them
(:mod:`vsplit.explain.exact`); the flow is the same.

Each party holds the chunk in progress and accepts the next one's tensors early (a peer may be a chunk ahead),
nothing further: a peer that sends ahead, twice, on a cut it does not own or in the wrong shape is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.errors import ConfigError, ProtocolError
from vsplit.explain.exact import ExactSteps
from vsplit.explain.knots import Knots, not_piecewise_linear
from vsplit.explain.messages import (
    METHODS,
    NAME_SEP,
    ExplainRequest,
    GroupAttribution,
    KnotActivations,
    PathActivations,
    PathGradients,
    PieceGradients,
)
from vsplit.explain.paths import Baseline, SourcePath, by_column, path_points
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.topology.graph import Cut, Topology


@dataclass
class Source:
    """A source segment's rows in the aligned order ``(cat, num)``, its baseline, and the table column each of its
    inputs comes from (:func:`~vsplit.explain.paths.column_names`)."""

    inputs: Sequence[torch.Tensor]
    baseline: Baseline
    columns: Sequence[str]


@dataclass
class PartyExplanation:
    """What one party learns: its own columns' attributions per aligned row (kept by that party), and at the
    coordinator the score and baseline score of each row, and each other party's group attribution (and top-k
    column names, where shared)."""

    columns: list[str] = field(default_factory=list)
    values: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    score: np.ndarray | None = None
    baseline_score: np.ndarray | None = None
    groups: dict[str, np.ndarray] = field(default_factory=dict)
    top: dict[str, list[list[str]]] = field(default_factory=dict)
    steps: int = 0
    method: str = "quadrature"
    knots: np.ndarray | None = None
    note: str = ""


class ExplainMachine(ExactSteps):
    """Runs one party's part of a joint explanation of ``topology``'s score.

    Args:
        name: this party (an owner in ``topology``).
        topology: the split as this party knows it.
        modules: this party's trained segments, by segment name.
        sources: this party's rows for each of its source segments (:class:`Source`).
        n_rows: how many aligned rows this party has (``None`` for a party without rows: it learns it).
        steps: (coordinator) quadrature nodes of the path; chunk: (coordinator) rows per exchange.
        share_top_k: the number of its most influential column names per row this party tells the coordinator
            (0: none; the coordinator learns only its group's attribution).
        output: (coordinator) the column of the loss segment's output explained (0: the score of a binary or
            regression model, a log-odds for binary).
        method: (coordinator) ``"exact"``: each row's breakpoints (:mod:`vsplit.explain.knots`; every segment must
            be piecewise linear), ``"quadrature"``: ``steps`` Gauss-Legendre nodes, ``"auto"``: exact where this
            party's segments allow it (a partner whose segments do not refuses: then choose ``"quadrature"``).
    """

    def __init__(self, name: str, topology: Topology, modules: Mapping[str, nn.Module], *,
                 sources: Mapping[str, Source], n_rows: int | None, steps: int = 32, chunk: int = 256,
                 share_top_k: int = 0, output: int = 0, method: str = "auto") -> None:
        self.name, self.topology = name, topology
        self.segments = topology.segments_of(name)
        missing = [s.name for s in self.segments if s.name not in modules]
        if missing:
            raise ProtocolError(f"{name}: no module for its segments {missing}", local=True)
        self.modules = dict(modules)
        self.sources = dict(sources)
        self.coordinator = topology.label_owner == name
        self.peers = set(topology.peers_of(name)) if not self.coordinator else set(topology.parties) - {name}
        self.n_rows = n_rows
        self.steps, self.chunk = steps, chunk
        self.share_top_k = max(0, int(share_top_k))
        self.output = output
        self.group_parties = sorted({s.owner for s in topology.segments if s.is_source and s.owner != name}) \
            if self.coordinator else []
        self.result = PartyExplanation(steps=steps)
        self.method = "quadrature"
        if self.coordinator:
            self._choose(method)
        self._knot_counts: list[np.ndarray] = []
        self.done = False
        self._started = False
        self._current = 0
        self._inbox: dict[tuple[str, int, int] | tuple[str, str, int], Any] = {}
        self._received: set[Any] = set()
        self._parts: list[np.ndarray] = []
        self._scores: list[np.ndarray] = []
        self._group_parts: dict[str, list[np.ndarray]] = {p: [] for p in self.group_parties}
        self._training = {id(m): m.training for m in self.modules.values()}
        self._chunk_state: dict[str, Any] = {}

    def _not_exact(self) -> str | None:
        """Why this party's segments rule out the exact method (``None``: they allow it)."""
        for seg in self.segments:
            part = not_piecewise_linear(self.modules[seg.name])
            if part is not None:
                return f"segment {seg.name!r} has a {part}, which is not piecewise linear"
        return None

    def _choose(self, method: str) -> None:
        if method not in ("auto", *METHODS):
            raise ConfigError(f"explain method must be auto, exact or quadrature, got {method!r}")
        why = self._not_exact() if method != "quadrature" else None
        if method == "exact" and why is not None:
            raise ConfigError(f"{self.name}: exact integrated gradients need piecewise-linear segments: {why}; "
                              "use method='quadrature'")
        self.method = "quadrature" if method == "quadrature" or why is not None else "exact"
        if why is not None:
            self.result.note = f"quadrature with {self.steps} nodes, not exact: {why}"

    # -- the machine interface ---------------------------------------------------------------------------------------
    def start(self) -> list[Outgoing]:
        if not self.coordinator:
            return []
        if self.n_rows is None:
            raise ProtocolError(f"{self.name}: the coordinator needs its row count", local=True)
        out = [Outgoing(p, ExplainRequest(n_rows=self.n_rows, chunk=self.chunk, steps=self.steps,
                                          topology=self.topology.view_fingerprint(p), method=self.method))
               for p in sorted(self.peers)]
        self._begin(out)
        return out

    def expects(self, peer: str) -> bool:
        """Whether ``peer`` still owes this machine a message (a peer that sent its last one may leave)."""
        if self.done:
            return False
        if not self._started or self.n_rows is None:
            return True
        last = max(0, -(-self.n_rows // self.chunk) - 1)
        owed = [("act", c.id, last) for c in self.topology.cuts if c.src_owner == peer and c.dst == self.name]
        owed += [("grad", c.id, last) for c in self.topology.cuts if c.dst == peer and c.src_owner == self.name]
        if peer in self.group_parties:
            owed.append(("group", peer, last))
        return any(key not in self._received for key in owed)

    def receive(self, sender: str, msg: Any) -> list[Outgoing]:
        if sender not in self.peers:
            raise ProtocolError(f"{self.name}: message from {sender!r}, which is not a peer in this topology")
        out: list[Outgoing] = []
        if isinstance(msg, ExplainRequest):
            self._request(sender, msg, out)
        elif isinstance(msg, KnotActivations if self.method == "exact" else PathActivations):
            cut = self._cut(msg.cut, dst=self.name, src_owner=sender)
            self._hold(("act", cut.id, msg.chunk), msg.chunk, msg if self.method == "exact" else msg.values)
        elif isinstance(msg, PieceGradients if self.method == "exact" else PathGradients):
            cut = self._cut(msg.cut, dst=sender, src_owner=self.name)
            self._hold(("grad", cut.id, msg.chunk), msg.chunk, msg.values)
        elif isinstance(msg, GroupAttribution) and self.coordinator and sender in self.group_parties:
            self._hold(("group", sender, msg.chunk), msg.chunk, msg)
        else:
            raise ProtocolError(f"{self.name}: {type(msg).__name__} from {sender!r} not expected now")
        if self._started and not self.done:
            self._progress(out)
        return out

    # -- messages in -------------------------------------------------------------------------------------------------
    def _request(self, sender: str, msg: ExplainRequest, out: list[Outgoing]) -> None:
        if self.coordinator or self._started or sender != self.topology.label_owner:
            raise ProtocolError(f"{self.name}: ExplainRequest from {sender!r} not expected now")
        if msg.topology != self.topology.view_fingerprint(self.name):
            raise ProtocolError(f"{self.name}: {sender!r} explains another topology than this party's config "
                                "describes", code=AbortCode.CONFIG_MISMATCH)
        if self.n_rows is not None and msg.n_rows != self.n_rows:
            raise ProtocolError(f"{self.name}: {sender!r} explains {msg.n_rows} rows, this party aligned "
                                f"{self.n_rows}", code=AbortCode.CONFIG_MISMATCH)
        why = self._not_exact() if msg.method == "exact" else None
        if why is not None:
            raise ProtocolError(f"{self.name}: {sender!r} asks for exact integrated gradients, but {why}; explain "
                                "with method='quadrature' (explain.method at the label party)",
                                code=AbortCode.CONFIG_MISMATCH)
        self.n_rows, self.steps, self.chunk = msg.n_rows, msg.steps, msg.chunk
        self.method = msg.method
        self.result.steps = msg.steps
        self._begin(out)

    def _cut(self, cut_id: int, *, dst: str, src_owner: str) -> Cut:
        for cut in self.topology.cuts:
            if cut.id == cut_id and cut.dst == dst and cut.src_owner == src_owner:
                return cut
        raise ProtocolError(f"{self.name}: no cut c{cut_id} from {src_owner!r} to {dst!r}")

    def _hold(self, key: Any, chunk: int, value: Any) -> None:
        if not self._started or chunk not in (self._current, self._current + 1) or key in self._inbox:
            raise ProtocolError(f"{self.name}: a message for chunk {chunk} not expected now (at chunk "
                                f"{self._current})")
        self._inbox[key] = value
        self._received.add(key)

    # -- chunks ------------------------------------------------------------------------------------------------------
    def _rows_of(self, chunk: int) -> int:
        assert self.n_rows is not None
        return max(0, min(self.chunk, self.n_rows - chunk * self.chunk))

    def _begin(self, out: list[Outgoing]) -> None:
        self._started = True
        self.result.method = self.method
        if self.method == "exact":
            self._float64 = self._exact_modules()
        self.alphas, self.weights = path_points(self.steps)
        for module in self.modules.values():
            module.eval()
        self._new_chunk()
        self._progress(out)

    def _new_chunk(self) -> None:
        self._chunk_state = {"outs": {}, "ins": {}, "paths": {}, "acc": {}, "cut_grads": {}, "fwd": set(),
                             "bwd": set(), "sent": set(), "seed": None, "knots": {}, "rows_in": {}}

    def _progress(self, out: list[Outgoing]) -> None:
        while not self.done:
            if self._rows_of(self._current) == 0:
                self._finish()
                return
            with torch.enable_grad():
                self._forward(out)
                self._backward(out)
            if not self._chunk_complete():
                return
            self._close_chunk(out)
            self._current += 1
            self._new_chunk()

    def _finish(self) -> None:
        for module in self.modules.values():
            module.train(self._training[id(module)])
        r = self.result
        if self._parts:
            r.values = np.concatenate(self._parts)
        else:
            r.values = np.zeros((self.n_rows or 0, len(r.columns)))
        if self.coordinator:
            scores = np.concatenate(self._scores) if self._scores else np.zeros((0, 2))
            r.baseline_score, r.score = scores[:, 0], scores[:, 1]
            r.groups = {p: np.concatenate(v) if v else np.zeros(0) for p, v in self._group_parts.items()}
            if self._knot_counts:
                r.knots = np.concatenate(self._knot_counts)
        self.done = True

    # -- forward -----------------------------------------------------------------------------------------------------
    def _forward(self, out: list[Outgoing]) -> None:
        if self.method == "exact":
            self._forward_exact(out)
            return
        st = self._chunk_state
        rows = self._rows_of(self._current)
        lo = self._current * self.chunk
        for seg in self.segments:
            if seg.name in st["fwd"]:
                continue
            module = self.modules[seg.name]
            if seg.is_source:
                source = self.sources[seg.name]
                inputs = [t[lo:lo + rows] for t in source.inputs]
                path = st["paths"][seg.name] = SourcePath(module, inputs, source.baseline, self.alphas)
                value = path.output
            else:
                leaves = []
                for name in seg.inputs:
                    leaf = self._input_leaf(name, rows)
                    if leaf is None:
                        break
                    leaves.append((name, leaf))
                else:
                    st["ins"][seg.name] = leaves
                    tensors = [leaf for _, leaf in leaves]
                    value = module(tensors[0]) if len(tensors) == 1 else module(dict(leaves))
                if len(leaves) != len(seg.inputs):
                    continue
            if not isinstance(value, torch.Tensor):
                raise ProtocolError(f"{self.name}: explain needs segment {seg.name!r} to return one tensor",
                                    local=True)
            st["outs"][seg.name] = value
            st["fwd"].add(seg.name)
            for cut in self.topology.cuts:
                if cut.src == seg.name:
                    values = np.ascontiguousarray(value.detach().numpy(), dtype=np.float32)
                    out.append(Outgoing(cut.dst, PathActivations(cut=cut.id, chunk=self._current, values=values)))
            if seg.loss:
                self._seed(value, rows)

    def _input_leaf(self, name: str, rows: int) -> torch.Tensor | None:
        """What segment ``name`` gives a reader here: a fresh leaf of this party's own output, or the activations a
        peer sent on its cut (``None`` until they arrive)."""
        st = self._chunk_state
        if name in st["outs"] and self.topology.segment(name).owner == self.name:
            return st["outs"][name].detach().requires_grad_()
        cut = next((c for c in self.topology.cuts if c.src == name and c.dst == self.name), None)
        if cut is None:
            return None
        key = ("leaf", cut.id)
        if key in st:
            return st[key]
        values = self._inbox.pop(("act", cut.id, self._current), None)
        if values is None:
            return None
        expected = (len(self.alphas) * rows, *cut.shapes[0])
        if values.shape != expected:
            raise ProtocolError(f"{self.name}: {cut.src_owner!r} sent path activations of shape {values.shape} on "
                                f"cut c{cut.id}, expected {expected}")
        st[key] = torch.from_numpy(values).requires_grad_()
        return st[key]

    def _seed(self, value: torch.Tensor, rows: int) -> None:
        st = self._chunk_state
        m = len(self.alphas)
        column = self._score_column(value)
        score = column.detach().double().numpy().reshape(m, rows)
        self._scores.append(np.stack([score[0], score[-1]], axis=1))
        weights = torch.from_numpy(self.weights.astype(np.float32)).repeat_interleave(rows)
        seed = torch.zeros_like(value)
        if value.ndim == 1:
            seed = weights
        else:
            seed[:, self.output] = weights
        st["seed"] = seed

    def _score_column(self, value: torch.Tensor) -> torch.Tensor:
        if value.ndim == 1:
            return value
        if value.ndim != 2 or not 0 <= self.output < value.shape[1]:
            raise ProtocolError(f"{self.name}: the score output {self.output} is not a column of the loss "
                                f"segment's output {tuple(value.shape)}", local=True)
        return value[:, self.output]

    def _seed_scores(self, value: torch.Tensor, knots: Knots) -> torch.Tensor:
        """Exact method: the scores at each row's ends, and the seed of the backward pass: each piece's length on
        the score."""
        column = self._score_column(value).detach().double().numpy()
        self._scores.append(np.stack([column[knots.offsets[:-1]], column[knots.offsets[1:] - 1]], axis=1))
        lengths = torch.from_numpy(knots.lengths()).to(value.dtype)
        seed = torch.zeros((len(lengths), *value.shape[1:]), dtype=value.dtype)
        if value.ndim == 1:
            return lengths
        seed[:, self.output] = lengths
        return seed

    # -- backward ----------------------------------------------------------------------------------------------------
    def _backward(self, out: list[Outgoing]) -> None:
        st = self._chunk_state
        progressed = True
        while progressed:
            progressed = False
            for seg in reversed(self.segments):
                if seg.name in st["bwd"] or seg.name not in st["fwd"]:
                    continue
                grad = self._output_grad(seg)
                if grad is None:
                    continue
                self._run_backward(seg, grad)
                st["bwd"].add(seg.name)
                progressed = True
            self._send_gradients(out)

    def _output_grad(self, seg: Any) -> torch.Tensor | None:
        """The complete gradient of ``seg``'s output, or ``None`` while a reader has not given its part."""
        st = self._chunk_state
        total = st["seed"] if seg.loss else None
        for reader in self.segments:
            if seg.name in reader.inputs and reader.name not in st["bwd"]:
                return None
        for cut in self.topology.cuts:
            if cut.src == seg.name:
                key = ("grad", cut.id, self._current)
                if key not in self._inbox:
                    return None
        parts = [] if total is None else [total]
        if seg.name in st["acc"]:
            parts.append(st["acc"][seg.name])
        for cut in self.topology.cuts:
            if cut.src == seg.name:
                values = self._inbox.pop(("grad", cut.id, self._current))
                if self.method == "exact":
                    parts.append(self._piece_grad(seg, values, cut))
                    continue
                if values.shape != tuple(st["outs"][seg.name].shape):
                    raise ProtocolError(f"{self.name}: {cut.dst!r} sent path gradients of shape {values.shape} on "
                                        f"cut c{cut.id}, expected {tuple(st['outs'][seg.name].shape)}")
                parts.append(torch.from_numpy(values))
        if not parts:
            value = st["outs"][seg.name]  # read by nothing that reaches the score
            if self.method == "exact":
                knots = st["knots"][seg.name]
                return value.new_zeros((len(knots.alphas) - knots.n, *value.shape[1:]))
            return torch.zeros_like(value)
        return sum(parts[1:], parts[0])

    def _run_backward(self, seg: Any, grad: torch.Tensor) -> None:
        if self.method == "exact":
            self._run_backward_exact(seg, grad)
            return
        st = self._chunk_state
        if seg.is_source:
            path = st["paths"][seg.name]
            values = path.attributions(grad).double().numpy()
            names, merged = by_column(values, self.sources[seg.name].columns)
            st.setdefault("attributions", []).append((names, merged))
            return
        inputs = st["ins"][seg.name]
        grads = torch.autograd.grad(st["outs"][seg.name], [leaf for _, leaf in inputs], grad_outputs=grad,
                                    allow_unused=True)
        for (name, leaf), g in zip(inputs, grads, strict=True):
            g = torch.zeros_like(leaf) if g is None else g
            bucket = "acc" if self.topology.segment(name).owner == self.name else "cut_grads"
            st[bucket][name] = st[bucket][name] + g if name in st[bucket] else g

    def _send_gradients(self, out: list[Outgoing]) -> None:
        st = self._chunk_state
        for cut in self.topology.cuts:
            if cut.dst != self.name or cut.id in st["sent"]:
                continue
            readers = [s for s in self.segments if cut.src in s.inputs]
            if all(r.name in st["bwd"] for r in readers) and cut.src in st["cut_grads"]:
                grads = st["cut_grads"][cut.src]
                if self.method == "exact":
                    msg: Any = self._gradient_message(cut, grads)
                else:
                    values = np.ascontiguousarray(grads.detach().numpy(), dtype=np.float32)
                    msg = PathGradients(cut=cut.id, chunk=self._current, values=values)
                out.append(Outgoing(cut.src_owner, msg))
                st["sent"].add(cut.id)

    def _chunk_complete(self) -> bool:
        st = self._chunk_state
        if len(st["bwd"]) != len(self.segments):
            return False
        if any(c.dst == self.name and c.id not in st["sent"] for c in self.topology.cuts):
            return False
        return all(("group", p, self._current) in self._inbox for p in self.group_parties)

    def _close_chunk(self, out: list[Outgoing]) -> None:
        st = self._chunk_state
        found = st.get("attributions", [])
        if found:
            names = [n for names, _ in found for n in names]
            values = np.concatenate([v for _, v in found], axis=1)
            names, values = by_column(values, names)  # a column read by two source segments adds up
            self.result.columns = names
            self._parts.append(values)
            if not self.coordinator:
                out.append(Outgoing(self.topology.label_owner, self._group_message(names, values)))
        for party in self.group_parties:
            msg = self._inbox.pop(("group", party, self._current))
            if len(msg.totals) != self._rows_of(self._current):
                raise ProtocolError(f"{self.name}: {party!r} sent {len(msg.totals)} group attributions for a chunk "
                                    f"of {self._rows_of(self._current)} rows")
            self._group_parts[party].append(msg.totals)
            if msg.top.shape[1]:
                names = msg.names.split(NAME_SEP)
                self.result.top.setdefault(party, []).extend([[names[i] for i in row] for row in msg.top.tolist()])

    def _group_message(self, names: list[str], values: np.ndarray) -> GroupAttribution:
        """This party's group total per row and, if its config allows, its top-k column names per row."""
        k = min(self.share_top_k, len(names))
        top = np.argsort(-np.abs(values), axis=1, kind="stable")[:, :k].astype(np.int32)
        return GroupAttribution(chunk=self._current, totals=values.sum(axis=1), top=np.ascontiguousarray(top),
                                names=NAME_SEP.join(names) if k else "")
