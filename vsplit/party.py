"""The per-party objects: each holds one organization's table, preprocessing, modules and optimizer settings.

A :class:`FeatureParty`, :class:`LabelParty` or :class:`ComputeParty` never holds a reference to another party's
data, labels or model: it builds the sans-IO machine (:class:`~vsplit.protocol.training.machine.SplitMachine`) that
runs its segments of a topology and talks to the other parties only through messages. The estimator, the CLI and
the networked runtime all use these objects.

Example:
    >>> import pandas as pd
    >>> bank = LabelParty("bank", pd.DataFrame({"customer_id": ["1", "2"], "age": [30, 40], "y": ["no", "yes"]}),
    ...                   label="y")
    >>> bank.labels.tolist(), bank.positive_label
    ([0.0, 1.0], 'yes')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from vsplit.data.parquet_table import ParquetTable
from vsplit.data.preprocess import TablePreprocessor
from vsplit.data.tables import check_table, normalise_ids
from vsplit.errors import ConfigError, DataError
from vsplit.models.build import default_segment
from vsplit.models.numeric import numeric_embedding
from vsplit.models.optim import make_optimizer
from vsplit.models.recipe import ARCHITECTURE, RECIPE
from vsplit.models.rng import PartyRng
from vsplit.models.seeds import derive_seed
from vsplit.models.tabular import TabularMLP
from vsplit.models.tasks import binarise, detect_positive, make_task  # noqa: F401 (the first two: re-exported)
from vsplit.protocol.training.machine import SplitMachine
from vsplit.protocol.training.messages import ROLE_TRAIN, ROLE_VALID
from vsplit.protocol.training.plan import Plan
from vsplit.topology.graph import Topology

Inputs = tuple[torch.Tensor, ...]
#: An optimizer by name (``"adam"``, ``"sgd"``, ``"adamw"``) or a factory ``params -> torch.optim.Optimizer``.
OptimizerSpec = str | Callable[[list[nn.Parameter]], torch.optim.Optimizer]


@dataclass(frozen=True)
class ModelSettings:
    """Architecture and optimizer settings of one party's part of the model, and how it compresses the tensors it
    sends across a cut (``compression``, ``error_feedback``: see :mod:`vsplit.protocol.training.compression`)."""

    embedding_width: int = 16
    #: how the default bottom sees numeric columns: "piecewise" (bins fitted on the party's own rows), "periodic"
    #: or "none" (the scaled values as they are); "auto" (default): piecewise, or none for a party that streams
    #: its table from Parquet (bins need the rows in memory); see :mod:`vsplit.models.numeric`
    numeric_embedding: str = RECIPE["numeric_embedding"]
    numeric_width: int = 8
    numeric_bins: int = 16
    #: heads of the default top (an ensemble sharing the one cut exchange; :mod:`vsplit.models.ensemble`)
    members: int = 1
    #: the defaults of the architecture and the optimizer are the default recipe's (:mod:`vsplit.models.recipe`)
    bottom_hidden: tuple[int, ...] = RECIPE["bottom_hidden"]
    top_hidden: tuple[int, ...] = RECIPE["top_hidden"]
    merge: str = "concat"
    dropout: float = RECIPE["dropout"]
    optimizer: OptimizerSpec = RECIPE["optimizer"]
    lr: float = RECIPE["lr"]
    weight_decay: float = RECIPE["weight_decay"]
    #: the learning rate over the epochs: "constant" or "cosine" (:mod:`vsplit.models.schedule`)
    lr_schedule: str = RECIPE["lr_schedule"]
    #: the decay per step of a moving average of the party's parameters, validated and kept (0: none;
    #: :mod:`vsplit.models.averaging`)
    ema: float = RECIPE["ema"]
    scaling: str = "quantile"
    missing: str = "error"
    compression: str = "none"
    error_feedback: bool = False
    #: refuse received activations or gradients beyond these magnitudes (``train.max_abs_activation``, ...)
    max_abs_activation: float | None = None
    max_abs_gradient: float | None = None
    #: a numeric column's few stray strings become missing values, with a warning (default: refused)
    coerce_numbers: bool = False



def trained_architecture(state: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that shaped the modules a model file ``state`` holds (its ``settings`` and the numeric embedding
    ``"auto"`` picked then), to build them again as they were trained whatever the defaults are now; empty for a file
    that recorded none.

    Example:
        >>> trained_architecture({"settings": {"bottom_hidden": [64], "lr": 0.1}, "numeric_embedding": "none"})
        {'bottom_hidden': (64,), 'numeric_embedding': 'none'}
    """
    saved = state.get("settings") or {}
    out = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in ARCHITECTURE}
    if state.get("numeric_embedding") is not None:
        out["numeric_embedding"] = state["numeric_embedding"]
    return out

class _Segments:
    """What every party shares: settings, a seed, a random stream, and the modules of its segments.

    ``seed`` is the run's (what the parties agree on); ``init_seed`` seeds what only this party draws: its initial
    weights and its random stream (dropout); between organizations a secret only this party holds
    (:mod:`vsplit.models.secret`), in one process ``seed`` unless given."""

    name: str
    settings: ModelSettings
    seed: int
    init_seed: int
    rng: PartyRng
    model: nn.Module | None
    inputs: Inputs | None
    segment_models: dict[str, nn.Module]

    def modules_for(self, topology: Topology, *, task_width: int = 1, skip: Sequence[str] = ()) -> dict[str, nn.Module]:
        """This party's module for each of its segments in ``topology`` (but ``skip``): a module the user brought
        for that segment, the party's own source model (its bottom), or a default one; built once and kept."""
        out = {}
        for seg in topology.segments_of(self.name):
            if seg.name in skip:
                continue
            if seg.name in self.segment_models:
                out[seg.name] = self.segment_models[seg.name]
            elif seg.is_source:
                if self.model is None:
                    raise DataError(f"{self.name}: segment {seg.name!r} needs this party's rows, but it has no "
                                    "feature columns")
                out[seg.name] = self.segment_models[seg.name] = self.model
            else:
                s = self.settings
                out[seg.name] = self.segment_models[seg.name] = default_segment(
                    topology, seg, hidden=s.top_hidden, merge=s.merge, task_width=task_width, seed=self.init_seed,
                    dropout=s.dropout, members=s.members)
        return out

    def optimizer(self, params: Sequence[nn.Parameter]) -> torch.optim.Optimizer:
        s = self.settings
        if callable(s.optimizer):
            return s.optimizer(list(params))
        return make_optimizer(s.optimizer, params, lr=s.lr, weight_decay=s.weight_decay)

    def machine(
        self,
        topology: Topology,
        *,
        data: Mapping[str, Inputs] | None = None,
        extra_modules: Mapping[str, nn.Module] | None = None,
        plan: Plan | None = None,
        train: bool = True,
        task: Any = None,
        task_width: int = 1,
        labels: torch.Tensor | None = None,
        **options: Any,
    ) -> SplitMachine:
        """The machine that runs this party's segments of ``topology`` (training, or scoring with ``train=False``).

        ``data`` gives the rows of each source segment (default: this party's own rows for its sources);
        ``extra_modules`` adds other parties' segments placed here (the centralized baseline).
        """
        extra = dict(extra_modules or {})
        own = {**extra, **self.modules_for(topology, task_width=task_width, skip=list(extra))}
        modules = {s.name: own[s.name] for s in topology.segments_of(self.name)}
        params = [p for m in dict.fromkeys(modules.values()) for p in m.parameters()]
        s = self.settings
        options = {"compression": s.compression, "error_feedback": s.error_feedback,
                   "max_abs_activation": s.max_abs_activation, "max_abs_gradient": s.max_abs_gradient,
                   "lr_schedule": s.lr_schedule, "ema": s.ema, **options}
        return SplitMachine(
            name=self.name, topology=topology, modules=modules, optimizer=self.optimizer(params) if train else None,
            rng=self.rng, data=data or {}, labels=labels, task=task, plan=plan, **options,
        )


class _Party(_Segments):
    """What feature and label parties share: an ID column, preprocessing and a bottom model."""

    def __init__(
        self,
        name: str,
        table: pd.DataFrame | ParquetTable,
        *,
        id_column: str,
        drop: Sequence[str],
        settings: ModelSettings,
        categorical: Sequence[str] | None,
        model: nn.Module | None,
        seed: int,
        init_seed: int | None = None,
    ) -> None:
        self.name = name
        self.id_column = id_column
        self.settings = settings
        self.seed = seed
        self.init_seed = seed if init_seed is None else init_seed
        streamed = isinstance(table, ParquetTable)
        self.ids = table.ids(id_column) if streamed else normalise_ids(table[id_column])
        features = table.drop(columns=[id_column, *drop])
        self.feature_columns = list(features.columns)
        self.rng = PartyRng(derive_seed(self.init_seed, name, "rng"))
        self.preprocessor: TablePreprocessor | None = None
        self.model: nn.Module | None = None
        self.inputs: Inputs | None = None
        self.segment_models: dict[str, nn.Module] = {}
        self._stream: tuple[str, int] | None = None
        #: the numeric embedding this party's default bottom uses (``auto`` resolved; ``None``: no default bottom)
        self.numeric_kind: str | None = None
        if not self.feature_columns:
            if model is not None:
                raise DataError(f"{name}: a bottom model was given but the table has no feature columns")
            return
        self.preprocessor = TablePreprocessor(
            categorical=categorical, scaling=settings.scaling, missing=settings.missing, seed=seed,
            coerce_numbers=settings.coerce_numbers,
        )
        if streamed:  # fitted by one pass over the file; the rows are read per batch in training
            from vsplit.data.stream_fit import fit_parquet

            fit_parquet(self.preprocessor, table.path, columns=self.feature_columns, batch_rows=table.batch_rows)
            self.inputs = (torch.zeros((0, len(self.preprocessor.categorical_)), dtype=torch.int64),
                           torch.zeros((0, self.preprocessor.n_numeric), dtype=torch.float32))
            self._stream = (str(table.path), table.cache_groups)
        else:
            self.preprocessor.fit(features)
            self.inputs = self.preprocessor.transform(features)
        if model is not None:
            self.model = model
            return
        kind = settings.numeric_embedding
        if kind == "auto":
            kind = "none" if streamed else "piecewise"
        self.numeric_kind = kind
        if streamed and kind != "none":
            raise ConfigError(f"{name}: numeric embeddings fit bins on the rows in memory, but this party streams "
                              "its table from Parquet; set model.numeric_embedding = \"none\" (or numeric_embedding="
                              "\"none\") to stream")
        with PartyRng(derive_seed(self.init_seed, name, "init")):
            numeric = numeric_embedding(kind, self.inputs[1], width=settings.numeric_width,
                                        n_bins=settings.numeric_bins)
            self.model = TabularMLP(
                cardinalities=self.preprocessor.cardinalities,
                n_numeric=self.preprocessor.n_numeric,
                hidden=settings.bottom_hidden,
                out_dim=settings.embedding_width,
                dropout=settings.dropout,
                numeric=numeric,
            )

    @property
    def has_features(self) -> bool:
        return self.model is not None

    @property
    def streamed(self) -> bool:
        """Whether this party reads its rows from Parquet batch by batch (:meth:`stream_from`)."""
        return self._stream is not None

    def rows_of(self, rows: np.ndarray) -> Inputs:
        """This party's inputs for its own row indices ``rows`` (an alignment): sliced from its tensors, or, after
        :meth:`stream_from`, read from Parquet batch by batch (:class:`~vsplit.data.batch_inputs.ParquetInputs`)."""
        assert self.inputs is not None
        if self._stream is not None:
            from vsplit.data.batch_inputs import ParquetInputs

            path, cache_groups = self._stream
            return tuple(ParquetInputs(path, self.preprocessor, rows=rows, cache_groups=cache_groups))
        index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        return tuple(t[index] for t in self.inputs)

    def stream_from(self, path: str, *, cache_groups: int = 4) -> None:
        """Train on rows read from the Parquet table at ``path`` (this party's table, same row order) per batch,
        instead of slicing the aligned rows out of the tensors held in memory; same results, bit for bit."""
        self._stream = (str(path), cache_groups)
        if self.inputs is not None:
            self.inputs = tuple(t[:0] for t in self.inputs)  # free the tensors; keep their dtypes and widths

    def source_data(self, topology: Topology, inputs: Inputs | None) -> dict[str, Inputs]:
        """``inputs`` (rows in the aligned order) for each source segment this party owns in ``topology``."""
        sources = topology.sources_of(self.name)
        if sources and inputs is None:
            raise DataError(f"{self.name}: the topology feeds its segment {sources[0].name!r} with this party's "
                            "rows, but it has no feature columns")
        return {seg.name: inputs for seg in sources} if inputs is not None else {}

    def prepare(self, table: pd.DataFrame) -> tuple[np.ndarray, Inputs | None]:
        """IDs and model inputs of a new table (for scoring), with the preprocessing fitted in training."""
        check_table(self.name, table, id_column=self.id_column)
        ids = normalise_ids(table[self.id_column])
        if self.preprocessor is None:
            return ids, None
        return ids, self.preprocessor.transform(table)



def _check(party: str, table: pd.DataFrame | ParquetTable, **checks: Any) -> None:
    if isinstance(table, ParquetTable):
        table.check(party, **checks)
    else:
        check_table(party, table, **checks)


class FeatureParty(_Party):
    """A party with feature columns and no labels.

    Args:
        name: the party's name.
        table: its own table: an ID column and its feature columns; a DataFrame, or a
            :class:`~vsplit.data.parquet_table.ParquetTable` to train from Parquet without reading it whole.
        id_column: name of the customer-ID column.
        label: the label column's name, which this party must NOT have.
        settings: model and optimizer settings.
        categorical: the categorical columns (default: detect by dtype).
        model: a bottom model of your own, called as ``model(cat, num)``.
        seed: the run's seed (preprocessing; and, at the label party, the validation rows).
        init_seed: seed for this party's initial weights and random stream (default: ``seed``); between
            organizations a secret only this party holds (:func:`vsplit.models.secret.init_seed`).
    """

    def __init__(
        self,
        name: str,
        table: pd.DataFrame | ParquetTable,
        *,
        id_column: str = "customer_id",
        label: str | None = None,
        settings: ModelSettings = ModelSettings(),
        categorical: Sequence[str] | None = None,
        model: nn.Module | None = None,
        seed: int = 0,
        init_seed: int | None = None,
    ) -> None:
        _check(name, table, id_column=id_column, forbidden=[label] if label else [])
        super().__init__(
            name, table, id_column=id_column, drop=[], settings=settings, categorical=categorical, model=model,
            seed=seed, init_seed=init_seed,
        )
        if not self.has_features:
            raise DataError(f"{name}: a feature party needs at least one feature column besides {id_column!r}")

    def trainer(self, rows: np.ndarray, *, topology: Topology, **hooks: Any) -> SplitMachine:
        """The machine that trains this party's segments of ``topology`` on its aligned ``rows``."""
        return self.machine(topology, data=self.source_data(topology, self.rows_of(rows)), **hooks)

    def scorer(self, inputs: Inputs, *, topology: Topology, **hooks: Any) -> SplitMachine:
        """The machine that sends this party's activations for joint scoring (``hooks``: its ``embedding_hooks``)."""
        return self.machine(topology, data=self.source_data(topology, inputs), train=False, **hooks)


class LabelParty(_Party):
    """The party that holds the labels and the top model; it may have feature columns of its own, or none.

    It coordinates training: it owns the loss segment of the topology (the vertical ``top``, the vanilla ``top``,
    the U-shaped ``tail``). Other arguments are as for :class:`FeatureParty`.

    Args:
        label: the label column.
        positive_label: (binary) the value that counts as positive; detected for {0, 1}, {False, True}, {"no", "yes"}.
        task: ``"binary"`` (default), ``"multiclass"``, ``"regression"`` or your own task object
            (see :mod:`vsplit.models.tasks`).
    """

    def __init__(
        self,
        name: str,
        table: pd.DataFrame | ParquetTable,
        *,
        label: str,
        id_column: str = "customer_id",
        positive_label: object = None,
        settings: ModelSettings = ModelSettings(),
        categorical: Sequence[str] | None = None,
        model: nn.Module | None = None,
        seed: int = 0,
        task: Any = "binary",
        init_seed: int | None = None,
    ) -> None:
        _check(name, table, id_column=id_column, label=label)
        super().__init__(
            name,
            table,
            id_column=id_column,
            drop=[label],
            settings=settings,
            categorical=categorical,
            model=model,
            seed=seed,
            init_seed=init_seed,
        )
        self.label = label
        self.task = make_task(task)
        self.labels, self.label_info = self.task.encode(table[label], name=label, positive_label=positive_label)
        self.positive_label = self.label_info.get("positive_label")

    @property
    def task_width(self) -> int:
        return self.task.output_width(len(self.label_info.get("classes", ())) or None)

    def trainer(
        self,
        rows: np.ndarray,
        *,
        topology: Topology,
        plan: Plan,
        placed: Mapping[str, tuple[nn.Module, Inputs]] | None = None,
        label_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        **options: Any,
    ) -> SplitMachine:
        """The coordinator's machine: trains this party's segments of ``topology`` on aligned ``rows``.

        ``placed`` holds other parties' source segments placed here with their rows (the centralized baseline:
        ``topology.placed_on(self.name)``). ``label_transform`` maps the aligned labels before training (e.g.
        label differential privacy).
        """
        labels = self.labels[torch.from_numpy(np.asarray(rows, dtype=np.int64))]
        if label_transform is not None:
            labels = label_transform(labels)
        own = self.rows_of(rows) if self.inputs is not None else None
        data = self._data(topology, own, placed)
        extra = {seg: model for seg, (model, _) in (placed or {}).items()}
        return self.machine(topology, data=data, extra_modules=extra, plan=plan, task=self.task,
                            task_width=self.task_width, labels=labels, **options)

    def scorer(
        self,
        inputs: Inputs | None,
        *,
        topology: Topology,
        n_rows: int,
        placed: Mapping[str, tuple[nn.Module, Inputs]] | None = None,
        chunk: int = 8192,
        **options: Any,
    ) -> SplitMachine:
        """The coordinator's scoring machine; its ``result`` holds the predictions of the ``n_rows`` aligned rows
        (``options``: the machine's, e.g. ``bag``)."""
        data = self._data(topology, inputs, placed)
        extra = {seg: model for seg, (model, _) in (placed or {}).items()}
        return self.machine(topology, data=data, extra_modules=extra, plan=Plan.scoring(n_rows, chunk=chunk),
                            train=False, task=self.task, task_width=self.task_width, **options)

    def _data(self, topology: Topology, own: Inputs | None,
              placed: Mapping[str, tuple[nn.Module, Inputs]] | None) -> dict[str, Inputs]:
        data = {seg: rows for seg, (_, rows) in (placed or {}).items() if rows is not None}
        for seg in topology.sources_of(self.name):
            if seg.name not in data:
                if own is None:
                    raise DataError(f"{self.name}: the topology feeds segment {seg.name!r} with this party's rows, "
                                    "but it has no feature columns")
                data[seg.name] = own
        return data

    @property
    def top(self) -> nn.Module | None:
        """The loss segment's module once built (``top`` in vertical and vanilla splits)."""
        return self.segment_models.get("top") or self.segment_models.get("tail")

    def check_shared(self, rows: np.ndarray, *, validation_fraction: float, min_per_class: int) -> None:
        """Refuse (:class:`DataError`, naming the counts and the fix) aligned ``rows`` whose labels cannot train a
        model: one class, too few of a class for training and validation, or (regression) too few values."""
        from vsplit.data.shared_labels import check_shared_labels

        y = self.labels[torch.from_numpy(np.asarray(rows, dtype=np.int64))].numpy()
        info = self.label_info
        if "positive_label" in info:
            classes = [f"not {info['positive_label']!r}", repr(info["positive_label"])]
        else:
            classes = [repr(c) for c in info.get("classes", ())]
        check_shared_labels(self.name, self.label, y, task=self.task.name, validation_fraction=validation_fraction,
                            min_per_class=min_per_class, classes=classes)

    def make_roles(self, rows: np.ndarray, *, validation_fraction: float, seed: int) -> np.ndarray:
        """Stratified choice of validation rows among the aligned ``rows`` (only the label party can stratify)."""
        y = self.labels[torch.from_numpy(np.asarray(rows, dtype=np.int64))].numpy()
        roles = np.full(len(rows), ROLE_TRAIN, dtype=np.uint8)
        rng = np.random.default_rng(derive_seed(seed, self.name, "validation"))
        groups = [None] if self.task.name == "regression" else np.unique(y).tolist()
        for value in groups:
            members = np.arange(len(y)) if value is None else np.flatnonzero(y == value)
            take = round(validation_fraction * len(members))
            roles[rng.permutation(members)[:take]] = ROLE_VALID
        return roles


class ComputeParty(_Segments):
    """A party with no rows and no labels: it only runs segments, e.g. the U-shaped server's ``middle``.

    Args:
        name: the party's name.
        settings: architecture of its default segments and its optimizer.
        segment_models: modules of your own for its segments, by segment name.
        seed: the run seed.
        init_seed: the seed of its initial weights (with the segment name) and its random stream (default:
            ``seed``; between organizations a secret only this party holds).
    """

    def __init__(self, name: str, *, settings: ModelSettings = ModelSettings(),
                 segment_models: Mapping[str, nn.Module] | None = None, seed: int = 0,
                 init_seed: int | None = None) -> None:
        self.name = name
        self.settings = settings
        self.seed = seed
        self.init_seed = seed if init_seed is None else init_seed
        self.rng = PartyRng(derive_seed(self.init_seed, name, "rng"))
        self.model = None
        self.inputs = None
        self.segment_models = dict(segment_models or {})

    def trainer(self, *, topology: Topology, **hooks: Any) -> SplitMachine:
        if topology.sources_of(self.name):
            raise ConfigError(f"{self.name}: a compute party has no rows, but the topology feeds it rows")
        return self.machine(topology, **hooks)

    def scorer(self, *, topology: Topology, **options: Any) -> SplitMachine:
        return self.machine(topology, train=False, **options)
