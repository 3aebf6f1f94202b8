"""The messages of split training. Type codes 0x0100–0x01FF.

What crosses between parties: the coordinator's plan (which aligned rows train and which validate, plus the shared
schedule), the activations of each cut, their gradients, and an end-of-epoch signal; first, each party's Ready with
its topology fingerprint. No record ID, feature value or label is ever a field.

Example:
    >>> import numpy as np
    >>> Activations(cut=0, slot=0, phase=TRAIN, epoch=0, step=0, values=np.zeros((2, 4), np.float32)).values.shape
    (2, 4)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.protocol.message import Message, message, require, require_array

#: Embedding phases.
TRAIN, EVAL, PREDICT = 0, 1, 2
FLOAT32 = np.dtype("float32")
#: Row roles in a plan.
ROLE_TRAIN, ROLE_VALID, ROLE_UNUSED = 0, 1, 2


@message(0x0101)
@dataclass(frozen=True)
class TrainingPlan(Message):
    """Coordinator -> every party: the agreed schedule and each aligned row's role (``predict``: score every row;
    ``then_score``: joint scoring of a test table follows training)."""

    epochs: int
    batch_size: int
    seed: int
    eval_chunk: int
    start_epoch: int
    predict: bool
    then_score: bool
    roles: np.ndarray

    def __post_init__(self) -> None:
        require(self.epochs >= 1, "epochs must be at least 1")
        require(self.batch_size >= 1, "batch_size must be at least 1")
        require(self.eval_chunk >= 1, "eval_chunk must be at least 1")
        require(0 <= self.start_epoch <= self.epochs, "start_epoch out of range")
        require(self.seed >= 0, "seed must be non-negative")
        require_array("roles", self.roles, dtype="uint8", ndim=1)
        require(bool((self.roles <= ROLE_UNUSED).all()), "roles must be 0 (train), 1 (valid) or 2 (unused)")


@message(0x0102)
@dataclass(frozen=True)
class Activations(Message):
    """The output of a segment crossing cut ``cut`` (tensor ``slot`` of it) for one batch or evaluation chunk."""

    cut: int
    slot: int
    phase: int
    epoch: int
    step: int
    values: np.ndarray

    def __post_init__(self) -> None:  # plain ifs: this runs at least twice per training step
        if self.phase not in (TRAIN, EVAL, PREDICT):
            raise ProtocolError(f"unknown phase {self.phase}")
        if self.epoch < 0 or self.step < 0 or self.cut < 0 or self.slot < 0:
            raise ProtocolError("cut, slot, epoch and step must be non-negative")
        if type(self.values) is not np.ndarray or self.values.dtype != FLOAT32 or self.values.ndim < 2:
            require_array("values", self.values, dtype=FLOAT32)
            raise ProtocolError(f"field 'values' must have at least 2 dimensions, got shape {self.values.shape}")


@message(0x0103)
@dataclass(frozen=True)
class Gradients(Message):
    """The loss gradient with respect to tensor ``slot`` of the activations that crossed cut ``cut``."""

    cut: int
    slot: int
    epoch: int
    step: int
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.epoch < 0 or self.step < 0 or self.cut < 0 or self.slot < 0:
            raise ProtocolError("cut, slot, epoch and step must be non-negative")
        if type(self.values) is not np.ndarray or self.values.dtype != FLOAT32 or self.values.ndim < 2:
            require_array("values", self.values, dtype=FLOAT32)
            raise ProtocolError(f"field 'values' must have at least 2 dimensions, got shape {self.values.shape}")


@message(0x0104)
@dataclass(frozen=True)
class EpochEnd(Message):
    """Coordinator -> every party: validation done; keep this epoch's weights if ``improved``; stop if ``stop``."""

    epoch: int
    improved: bool
    stop: bool

    def __post_init__(self) -> None:
        require(self.epoch >= 0, "epoch must be non-negative")


@message(0x0105)
@dataclass(frozen=True)
class Ready(Message):
    """Every party -> the coordinator (the label owner), first: ready to train or score. ``resume_epoch`` is the last
    epoch it has a checkpoint of (-1: none); the coordinator resumes everyone from the oldest epoch all parties have.
    ``topology`` is the sender's topology fingerprint: parties configured with different splits refuse each other."""

    resume_epoch: int
    topology: str

    def __post_init__(self) -> None:
        require(self.resume_epoch >= -1, "resume_epoch must be -1 or more")
        require(0 < len(self.topology) <= 64, "topology fingerprint must be 1 to 64 characters")
