"""The shared schedule: both sides derive the same batches from a seed, so no record ID needs to be sent.

Example:
    >>> import numpy as np
    >>> plan = Plan(epochs=2, batch_size=2, seed=7, roles=np.array([0, 0, 1, 0, 0], np.uint8))
    >>> [b.tolist() for b in plan.batches(0)] == [b.tolist() for b in plan.batches(0)]
    True
    >>> sorted(np.concatenate(plan.batches(0)).tolist())
    [0, 1, 3, 4]
    >>> [c.tolist() for c in plan.eval_chunks()]
    [[2]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.protocol.training.messages import ROLE_TRAIN, ROLE_VALID, TrainingPlan


@dataclass(frozen=True)
class Plan:
    """Epochs, batch size, seed, and the role of each aligned row (train, validation, unused)."""

    epochs: int
    batch_size: int
    seed: int
    roles: np.ndarray
    eval_chunk: int = 8192
    start_epoch: int = 0
    predict: bool = False
    #: a joint scoring session follows training (a compute party, which holds no test table, learns it here)
    then_score: bool = False
    #: steps a source party may have in flight before their gradients return (1: exact)
    window: int = 1
    #: steps per exchange: a source party updates on the gradients of its last ``local_steps`` batches (1: exact)
    local_steps: int = 1

    @property
    def ahead(self) -> int:
        """How many training steps a source party may send before the first of them is answered."""
        return max(self.window, self.local_steps)

    @classmethod
    def scoring(cls, n_rows: int, *, chunk: int = 8192) -> Plan:
        """The plan of joint prediction: every aligned row, in order, in chunks of ``chunk``."""
        return cls(epochs=1, batch_size=1, seed=0, roles=np.full(n_rows, ROLE_VALID, np.uint8), eval_chunk=chunk,
                   predict=True)

    @property
    def n_rows(self) -> int:
        return len(self.roles)

    def batches(self, epoch: int) -> list[np.ndarray]:
        """Aligned row positions of each training batch of ``epoch``, in order."""
        train = np.flatnonzero(self.roles == ROLE_TRAIN)
        order = train[np.random.default_rng([self.seed, epoch]).permutation(len(train))]
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def eval_chunks(self) -> list[np.ndarray]:
        """Aligned row positions of the validation rows, in chunks."""
        valid = np.flatnonzero(self.roles == ROLE_VALID)
        return [valid[i : i + self.eval_chunk] for i in range(0, len(valid), self.eval_chunk)]

    def to_message(self) -> TrainingPlan:
        return TrainingPlan(
            epochs=self.epochs,
            batch_size=self.batch_size,
            seed=self.seed,
            eval_chunk=self.eval_chunk,
            start_epoch=self.start_epoch,
            predict=self.predict,
            then_score=self.then_score,
            roles=self.roles.astype(np.uint8),
            window=self.window,
            local_steps=self.local_steps,
        )

    @classmethod
    def from_message(cls, msg: TrainingPlan) -> Plan:
        return cls(
            epochs=msg.epochs,
            batch_size=msg.batch_size,
            seed=msg.seed,
            roles=msg.roles,
            eval_chunk=msg.eval_chunk,
            start_epoch=msg.start_epoch,
            predict=msg.predict,
            then_score=msg.then_score,
            window=msg.window,
            local_steps=msg.local_steps,
        )
