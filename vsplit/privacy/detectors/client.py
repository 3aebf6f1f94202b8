"""A client party's configured detectors (``[privacy] detectors``), bound to its labels once its rows are aligned.

Theory of operation. A detector judges the gradients a client receives against the labels of the batch's rows, so it
needs the labels in *aligned* order, which only exist once PSI has run: :class:`ClientDetectors` keeps the labels
(and SplitGuard's canary flags) in the order of the client's own table and, when the training session has built the
machine, :meth:`ClientDetectors.prepare` binds them through the alignment (``labels[rows]``) and runs SplitOut's
warm-up on a copy of the machine's own client segment, as it starts, and the machine's own aligned inputs (canary
rows left out). The warm-up runs under its own torch random stream, so training is the same with or without it.

Which labels: a U-shaped client holds them (its ``data.label``); a vanilla client hands them to the server, so it
names, in ``privacy.detector_labels``, the column of its table holding the labels as it handed them over (fake ones
for SplitGuard's canary rows, flagged in ``privacy.canary_column``). Neither column is a model input.

Example:
    >>> import numpy as np
    >>> c = ClientDetectors(["gradient_scrutinizer"], party="partner", labels=np.array([1, 0, 1]))
    >>> c.prepare(None, np.array([2, 0, 1]))
    >>> c.detectors[0].labels.tolist()
    [1, 1, 0]
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from vsplit.errors import ConfigError
from vsplit.protocol.training.hooks import TrainingHooks


class ClientDetectors:
    """The detectors ``texts`` (``"name"`` or ``"name:key=value,..."``) of client ``party``.

    Args:
        texts: detector configs, as ``privacy.detectors`` lists them.
        party: the client's name (the party whose received gradients are observed).
        labels: the labels, one per row of the client's own table, in table order.
        canaries: which of those rows are SplitGuard canaries (labels faked on purpose); needed for ``splitguard``.
        seed: seed of SplitOut's warm-up.
        warm_up_epochs: epochs of SplitOut's warm-up per surrogate and learning rate.
        lr: learning rate of training (the warm-up also tries three times it).
        batch_size: the training batch size.
    """

    def __init__(
        self,
        texts: Sequence[str],
        *,
        party: str,
        labels: np.ndarray,
        canaries: np.ndarray | None = None,
        seed: int = 0,
        warm_up_epochs: int = 4,
        lr: float = 1e-3,
        batch_size: int = 64,
    ) -> None:
        from vsplit.privacy.detectors.registry import make_detector

        self.party = party
        self.detectors = [make_detector(text) for text in texts]
        self.labels = np.asarray(labels)
        self.canaries = None if canaries is None else np.asarray(canaries, dtype=bool)
        if any(d.name == "splitguard" for d in self.detectors) and (self.canaries is None or not self.canaries.any()):
            raise ConfigError(f"{party}: detector 'splitguard' needs canary rows (privacy.canary_column flags them; "
                              "plant them with vsplit.privacy.detectors.plant_canaries when preparing the labels you "
                              "hand the server)")
        self.seed, self.warm_up_epochs, self.lr, self.batch_size = seed, warm_up_epochs, lr, batch_size

    def hooks(self) -> TrainingHooks:
        """Every detector as an observer of this client (merge with its defenses by ``merge_hooks``)."""
        return TrainingHooks(observers={self.party: list(self.detectors)})

    def prepare(self, machine: Any, rows: np.ndarray) -> None:
        """Bind the labels through the alignment ``rows`` (own-table row per aligned position); warm SplitOut up on
        ``machine``'s client segment and inputs."""
        from vsplit.privacy.detectors.splitout import SplitOut

        rows = np.asarray(rows, dtype=np.int64)
        labels = self.labels[rows]
        canaries = None if self.canaries is None else self.canaries[rows]
        for d in self.detectors:
            d.bind(labels=labels, canaries=canaries)
            if isinstance(d, SplitOut):
                self._warm_up(d, machine, labels, canaries)

    def _warm_up(self, detector: Any, machine: Any, labels: np.ndarray, canaries: np.ndarray | None) -> None:
        from vsplit.privacy.detectors.splitout import default_surrogates

        cuts = machine.topology.cuts_out_of(self.party)
        if not cuts or cuts[0].src not in machine.data:
            raise ConfigError(f"{self.party}: detector 'splitout' warms up on the segment this party feeds with its "
                              "rows and sends to the server; this party has none")
        source = cuts[0].src
        model = machine.modules[source]
        shape = cuts[0].shapes[0]
        if len(shape) != 1:
            raise ConfigError(f"{self.party}: detector 'splitout' needs flat activations at the cut, not {shape}")
        width = shape[0]
        own = np.flatnonzero(~canaries) if canaries is not None else np.arange(len(labels))
        classes, codes = np.unique(labels[own], return_inverse=True)
        surrogates = default_surrogates(width, max(2, len(classes)), seed=self.seed)
        inputs = [t[own] for t in machine.data[source]]
        detector.warm_up(copy.deepcopy(model), inputs, codes, surrogates=surrogates, learning_rates=(self.lr,
                         3 * self.lr), epochs=self.warm_up_epochs, batch_size=self.batch_size, seed=self.seed)
