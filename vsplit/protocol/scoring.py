"""Joint prediction as sans-IO machines: feature parties send embeddings, only the label party gets scores.

Example:
    >>> import torch
    >>> from vsplit.models.rng import PartyRng
    >>> from vsplit.models.top import TopModel
    >>> from vsplit.models.tabular import TabularMLP
    >>> from vsplit.runtime.inprocess import connect, run_machines
    >>> bottom = TabularMLP(cardinalities=[], n_numeric=2, out_dim=4)
    >>> top = TopModel(widths={"partner": 4})
    >>> inputs = (torch.zeros(5, 0, dtype=torch.long), torch.randn(5, 2))
    >>> machines = {
    ...     "bank": LabelScorer(name="bank", top=top, local={}, remote={"partner": 4}, n_rows=5, chunk=2),
    ...     "partner": FeatureScorer(name="partner", label_party="bank", model=bottom, inputs=inputs, chunk=2),
    ... }
    >>> run_machines(connect(["bank", "partner"], session=b"p" * 16), machines)["bank"].shape
    (5,)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from vsplit.errors import ProtocolError
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.protocol.training.hooks import EmbeddingHook, StepInfo
from vsplit.protocol.training.messages import PREDICT, Embeddings

Inputs = tuple[torch.Tensor, torch.Tensor]


def chunks(n_rows: int, chunk: int) -> list[slice]:
    """The row slices both sides agree on for ``n_rows`` aligned rows."""
    return [slice(i, min(i + chunk, n_rows)) for i in range(0, n_rows, chunk)]


class FeatureScorer:
    """Sends this party's embeddings of every aligned row to the label party, then is done.

    ``embedding_hooks`` are the party's training-time hooks; they see each chunk with ``info.training`` False.
    """

    def __init__(
        self,
        *,
        name: str,
        label_party: str,
        model: nn.Module,
        inputs: Inputs,
        chunk: int = 8192,
        embedding_hooks: Sequence[EmbeddingHook] = (),
    ) -> None:
        self.name, self.label_party, self.model, self.inputs, self.chunk = name, label_party, model, inputs, chunk
        self.embedding_hooks = list(embedding_hooks)
        self.done = False
        self.result = None

    def start(self) -> list[Outgoing]:
        cat, num = self.inputs
        self.model.eval()
        out = []
        with torch.no_grad():
            for i, rows in enumerate(chunks(len(cat), self.chunk)):
                values = self.model(cat[rows], num[rows])
                info = StepInfo(party=self.name, epoch=0, step=i, rows=None, training=False)
                for hook in self.embedding_hooks:
                    values = hook(values, info)
                message = Embeddings(phase=PREDICT, epoch=0, step=i, values=values.numpy())
                out.append(Outgoing(self.label_party, message))
        self.done = True
        return out

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        raise ProtocolError(f"{self.name}: nothing expected while scoring, got {type(msg).__name__} from {sender!r}")


class LabelScorer:
    """Collects every party's embeddings and computes the probabilities; ``result`` is a float64 array."""

    def __init__(
        self,
        *,
        name: str,
        top: nn.Module,
        local: Mapping[str, tuple[nn.Module, Inputs]],
        remote: Mapping[str, int],
        n_rows: int,
        chunk: int = 8192,
    ) -> None:
        self.name, self.top, self.local, self.remote = name, top, dict(local), dict(remote)
        self.slices = chunks(n_rows, chunk)
        self.n_rows = n_rows
        self._got: dict[str, list[np.ndarray]] = {p: [] for p in self.remote}
        self.done = False
        self.result: np.ndarray | None = None

    def start(self) -> list[Outgoing]:
        self._maybe_finish()
        return []

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        if sender not in self._got or not isinstance(msg, Embeddings) or msg.phase != PREDICT:
            raise ProtocolError(f"{self.name}: {type(msg).__name__} from {sender!r} not expected while scoring")
        got = self._got[sender]
        if msg.step != len(got) or msg.step >= len(self.slices):
            raise ProtocolError(f"{self.name}: {sender!r} sent scoring chunk {msg.step} out of order")
        expected = self.slices[msg.step]
        if msg.values.shape != (expected.stop - expected.start, self.remote[sender]):
            raise ProtocolError(f"{self.name}: {sender!r} sent a scoring chunk of shape {msg.values.shape}")
        got.append(msg.values)
        self._maybe_finish()
        return []

    def _maybe_finish(self) -> None:
        if any(len(v) < len(self.slices) for v in self._got.values()):
            return
        for module in [self.top, *(m for m, _ in self.local.values())]:
            module.eval()
        parts = []
        with torch.no_grad():
            for i, rows in enumerate(self.slices):
                embeddings = {n: m(cat[rows], num[rows]) for n, (m, (cat, num)) in self.local.items()}
                embeddings.update({p: torch.from_numpy(v[i]) for p, v in self._got.items()})
                parts.append(torch.sigmoid(self.top(embeddings)).double())
        self.result = torch.cat(parts).numpy() if parts else np.zeros(0)
        self.done = True
