"""One party's application, written once: align by PSI, plan, train; or align and score.

Theory of operation. A session is a generator. It yields ``(stage, machine)`` pairs, the sans-IO machines the party
must run in turn, and is sent each machine's result back; when it returns, its value is the party's outcome. The
in-process runner (:func:`vsplit.app.local.run_sessions`) advances every party's session together over memory
channels (the estimator, notebooks, tests); a party process (:mod:`vsplit.node`) drives its own session
over its mutual-TLS pump. So both runtimes run the same sequence, with the same seeds, and reach the same model.

Stages: ``"psi"`` (only for the parties whose rows must be aligned: :meth:`Topology.alignment_groups`), then
``"train"`` or ``"score"``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.data.tables import all_ids
from vsplit.models.recipe import BATCH_SIZE, RECIPE
from vsplit.models.seeds import derive_seed
from vsplit.party import ComputeParty, FeatureParty, LabelParty
from vsplit.protocol.training.hooks import TrainingHooks
from vsplit.protocol.training.messages import ROLE_TRAIN
from vsplit.protocol.training.plan import Plan
from vsplit.psi.alignment import canonical_rows
from vsplit.topology.graph import Topology

Session = Generator[tuple[str, Any], Any, "Outcome"]
AnyParty = FeatureParty | LabelParty | ComputeParty


@dataclass(frozen=True)
class Schedule:
    """The training schedule the coordinator turns into a plan."""

    epochs: int = RECIPE["epochs"]
    #: ``None``: :data:`~vsplit.models.recipe.BATCH_SIZE`, smaller on a small table (:func:`fitted_batch`)
    batch_size: int | None = None
    validation_fraction: float = 0.1
    patience: int | None = RECIPE["patience"]
    #: what early stopping watches and which epoch is kept: "val_loss", the task's "val_<metric>" or "auto"
    #: (:func:`vsplit.models.recipe.resolve_monitor`)
    monitor: str = RECIPE["monitor"]
    seed: int = 0
    eval_chunk: int = 8192
    #: tell every party that joint scoring of a test table follows training
    then_score: bool = False
    #: training steps a source party may have in flight, and steps per exchange (see docs/wan.md); 1: exact
    window: int = 1
    local_steps: int = 1
    #: after matching, each class must occur this often among the shared customers (regression: rows)
    min_class_rows: int = 10
    #: with ``batch_size=None`` the batch is halved (not below :data:`MIN_BATCH`) until an epoch has at least this
    #: many optimizer steps on the training rows, and early stopping waits at least ``PATIENCE_STEPS`` times as many
    #: steps (0: neither; :func:`fitted_batch`, :func:`fitted_patience`)
    min_steps: int = RECIPE["min_steps"]


#: the smallest batch :func:`fitted_batch` shrinks to
MIN_BATCH = 32


def fitted_batch(batch_size: int | None, n_train: int, min_steps: int) -> int:
    """The batch a plan uses for ``n_train`` training rows: ``batch_size`` as given, or for ``None``
    :data:`~vsplit.models.recipe.BATCH_SIZE` halved while an epoch would have fewer than ``min_steps`` optimizer
    steps, but not below :data:`MIN_BATCH`.

    On a small table a batch of 256 gives an epoch of a handful of steps, so early stopping, patience and the moving
    average (counted in epochs and steps) stop a network that has barely moved; this makes them count enough steps.
    A large table keeps 256 (27,000 training rows: 106 steps).

    >>> fitted_batch(None, 900, 32), fitted_batch(None, 2_700, 32), fitted_batch(None, 27_000, 32)
    (32, 64, 256)
    >>> fitted_batch(None, 900, 0), fitted_batch(256, 900, 32), fitted_batch(8, 900, 32)
    (256, 256, 8)
    """
    if batch_size is not None:
        return batch_size
    batch = BATCH_SIZE
    while min_steps > 0 and batch // 2 >= MIN_BATCH and -(-n_train // batch) < min_steps:
        batch //= 2
    return batch


#: early stopping waits at least this many times ``min_steps`` optimizer steps (:func:`fitted_patience`)
PATIENCE_STEPS = 10


def fitted_patience(patience: int | None, steps_per_epoch: int, min_steps: int) -> int | None:
    """The epochs early stopping waits for a better one: ``patience``, or more on a small table, so that the wait
    covers at least ``PATIENCE_STEPS * min_steps`` optimizer steps (``None``: no early stopping; ``min_steps`` 0:
    ``patience`` as given).

    >>> fitted_patience(5, 29, 32), fitted_patience(5, 43, 32), fitted_patience(5, 106, 32), fitted_patience(5, 29, 0)
    (12, 8, 5, 5)
    """
    if patience is None or min_steps <= 0:
        return patience
    return max(patience, -(-PATIENCE_STEPS * min_steps // max(1, steps_per_epoch)))


@dataclass(frozen=True)
class PsiSettings:
    """How a session aligns its rows: PSI config, ID policy and where the curve arithmetic runs (``backend``)."""

    config: Any = None
    policy: Any = None
    backend: Any = None
    #: this party's folder for resumable PSI progress (:mod:`vsplit.psi.resume`); ``None`` keeps none
    state_dir: Any = None


@dataclass
class Outcome:
    """What a session leaves: the alignment (or ``None``), this party's aligned rows, and its machine's result."""

    alignment: Any = None
    rows: np.ndarray | None = None
    result: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def psi_machine(party: str, topology: Topology, ids: Any, psi: PsiSettings | None = None) -> Any:
    """``party``'s PSI machine for ``ids`` (a sequence or an ID source): the label owner runs one exchange per
    other row holder."""
    from vsplit.data.id_sources import IdSource
    from vsplit.psi import IdPolicy, Partner, PsiConfig
    from vsplit.psi import LabelParty as PsiLabel

    ids = ids if isinstance(ids, IdSource) else list(ids)  # a file source streams its IDs: never all in memory

    holders = [p for p in topology.row_holders() if p != topology.label_owner]
    psi = psi or PsiSettings()
    config = psi.config if psi.config is not None else PsiConfig()
    policy = psi.policy if psi.policy is not None else IdPolicy()
    if party == topology.label_owner:
        return PsiLabel(ids, partners=holders, config=config, policy=policy, backend=psi.backend,
                        state_dir=psi.state_dir)
    return Partner(ids, label_party=topology.label_owner, config=config, policy=policy, backend=psi.backend,
                   state_dir=psi.state_dir)


def _align(party: AnyParty, topology: Topology, ids: Any, psi: PsiSettings | None, stage: str = "psi") -> Session:
    """Rows of this party in the agreed order (sorted IDs): by PSI (a ``stage`` of that name) where the topology
    needs it."""
    if ids is None:
        return Outcome()
    if not topology.alignment_groups():
        return Outcome(rows=np.argsort(all_ids(ids), kind="stable"))
    alignment = yield stage, psi_machine(party.name, topology, ids, psi)
    return Outcome(alignment=alignment, rows=canonical_rows(alignment))


def make_plan(party: LabelParty, rows: np.ndarray, schedule: Schedule) -> Plan:
    """The coordinator's plan: stratified validation rows and the shared batch schedule's seed, once the aligned
    rows' labels are known to be enough to train on (:func:`~vsplit.data.shared_labels.check_shared_labels`)."""
    party.check_shared(rows, validation_fraction=schedule.validation_fraction, min_per_class=schedule.min_class_rows)
    roles = party.make_roles(rows, validation_fraction=schedule.validation_fraction, seed=schedule.seed)
    batch = fitted_batch(schedule.batch_size, int((roles == ROLE_TRAIN).sum()), schedule.min_steps)
    return Plan(epochs=schedule.epochs, batch_size=batch,
                seed=derive_seed(schedule.seed, "schedule") % 2**31, roles=roles, eval_chunk=schedule.eval_chunk,
                then_score=schedule.then_score, window=schedule.window, local_steps=schedule.local_steps)


def train_session(
    party: AnyParty,
    topology: Topology,
    *,
    schedule: Schedule,
    psi: PsiSettings | None = None,
    hooks: TrainingHooks | None = None,
    callbacks: Sequence[Any] = (),
    checkpointing: tuple[int, Callable | None, Callable | None] = (-1, None, None),
    placed: Mapping[str, tuple[nn.Module, Any]] | None = None,
    rows: np.ndarray | None = None,
    prepare: Callable[[Any, np.ndarray], None] | None = None,
    bag: tuple[int, int] = (0, 1),
) -> Session:
    """Align, then train this party's segments of ``topology``.

    ``rows`` skips the alignment (rows already aligned, in the agreed order). ``placed`` (coordinator only) holds
    other parties' segments placed here with their aligned rows: the centralized baseline. ``prepare(machine, rows)``
    runs once the training machine is built, before it starts (e.g. binding a client's detectors to aligned labels).
    ``bag``: ``(network, networks)``, the network of a bag this is (every party must say the same).
    """
    if rows is not None:
        outcome = Outcome(rows=rows)
    else:
        outcome = yield from _align(party, topology, getattr(party, "ids", None), psi)
    hooks = hooks or TrainingHooks()
    resume_epoch, restore, on_epoch_end = checkpointing
    common: dict[str, Any] = {"resume_epoch": resume_epoch, "restore": restore, "on_epoch_end": on_epoch_end,
                              "bag": bag}
    if isinstance(party, LabelParty):
        assert outcome.rows is not None
        plan = make_plan(party, outcome.rows, schedule)
        steps = -(-int((plan.roles == ROLE_TRAIN).sum()) // plan.batch_size)
        machine = party.trainer(
            outcome.rows, topology=topology, plan=plan, placed=placed,
            patience=fitted_patience(schedule.patience, steps, schedule.min_steps), monitor=schedule.monitor,
            callbacks=callbacks,
            gradient_hooks=hooks.gradient_hooks, label_transform=hooks.label_transform,
            embedding_hooks=hooks.embedding_hooks.get(party.name, ()),
            observers=hooks.observers.get(party.name, ()), local_loss=hooks.local_losses.get(party.name), **common,
        )
    elif isinstance(party, FeatureParty):
        assert outcome.rows is not None
        machine = party.trainer(
            outcome.rows, topology=topology, embedding_hooks=hooks.embedding_hooks.get(party.name, ()),
            observers=hooks.observers.get(party.name, ()), local_loss=hooks.local_losses.get(party.name), **common,
        )
    else:
        machine = party.trainer(topology=topology, observers=hooks.observers.get(party.name, ()), **common)
    if prepare is not None:
        prepare(machine, outcome.rows)
    outcome.result = yield "train", machine
    outcome.extra["machine"] = machine
    return outcome


def score_session(
    party: AnyParty,
    topology: Topology,
    inputs: tuple[np.ndarray, Any] | None,
    *,
    psi: PsiSettings | None = None,
    hooks: TrainingHooks | None = None,
    placed: Mapping[str, tuple[nn.Module, Any]] | None = None,
    chunk: int = 8192,
    rows: np.ndarray | None = None,
    psi_stage: str = "psi",
    bag: tuple[int, int] = (0, 1),
) -> Session:
    """Align ``inputs`` (``(ids, model inputs)`` of a new table; ``None`` for a compute party), then score jointly.

    The coordinator's outcome ``result`` holds the predictions of its aligned rows, in ``rows`` order.
    ``psi_stage`` names the alignment's stage (a party process scoring its test table after training, on the same
    pump, calls it ``"test psi"``). ``bag``: ``(network, networks)``, the network of a bag scoring (as in training).
    """
    hooks = hooks or TrainingHooks()
    ids, tensors = inputs if inputs is not None else (None, None)
    outcome = Outcome(rows=rows) if rows is not None else (yield from _align(party, topology, ids, psi, psi_stage))
    rows = outcome.rows
    picked = None
    if tensors is not None and rows is not None:
        index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        picked = tuple(t[index] for t in tensors)
    if isinstance(party, LabelParty):
        assert rows is not None
        machine = party.scorer(picked, topology=topology, n_rows=len(rows), placed=placed, chunk=chunk, bag=bag)
    elif isinstance(party, FeatureParty):
        assert picked is not None
        machine = party.scorer(picked, topology=topology, embedding_hooks=hooks.embedding_hooks.get(party.name, ()),
                               bag=bag)
    else:
        machine = party.scorer(topology=topology, bag=bag)
    outcome.result = yield "score", machine
    return outcome
