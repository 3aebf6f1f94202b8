"""The per-party objects: each holds one organization's table, preprocessing, model and optimizer settings.

A :class:`FeatureParty` or :class:`LabelParty` never holds a reference to another party's data, labels or model:
it builds the sans-IO machines that talk to the other parties only through messages. The estimator, the CLI and
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

import numpy as np
import pandas as pd
import torch
from torch import nn

from vsplit.data.preprocess import TablePreprocessor
from vsplit.data.tables import check_table, normalise_ids
from vsplit.errors import DataError
from vsplit.models.optim import make_optimizer
from vsplit.models.rng import PartyRng
from vsplit.models.seeds import derive_seed
from vsplit.models.tabular import TabularMLP
from vsplit.models.tasks import binarise, detect_positive  # re-exported: moved to vsplit.models.tasks
from vsplit.models.top import TopModel
from vsplit.protocol.scoring import FeatureScorer, LabelScorer
from vsplit.protocol.training import FeatureTrainer, LabelTrainer, Plan
from vsplit.protocol.training.messages import ROLE_TRAIN, ROLE_VALID

Inputs = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class ModelSettings:
    """Architecture and optimizer settings of one party's part of the model."""

    embedding_width: int = 16
    bottom_hidden: tuple[int, ...] = (64,)
    top_hidden: tuple[int, ...] = (32,)
    merge: str = "concat"
    dropout: float = 0.0
    optimizer: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    scaling: str = "quantile"
    missing: str = "error"


class _Party:
    """What feature and label parties share: an ID column, preprocessing and a bottom model."""

    def __init__(
        self,
        name: str,
        table: pd.DataFrame,
        *,
        id_column: str,
        drop: Sequence[str],
        settings: ModelSettings,
        categorical: Sequence[str] | None,
        model: nn.Module | None,
        seed: int,
    ) -> None:
        self.name = name
        self.id_column = id_column
        self.settings = settings
        self.seed = seed
        self.ids = normalise_ids(table[id_column])
        features = table.drop(columns=[id_column, *drop])
        self.feature_columns = list(features.columns)
        self.rng = PartyRng(derive_seed(seed, name, "rng"))
        self.preprocessor: TablePreprocessor | None = None
        self.model: nn.Module | None = None
        self.inputs: Inputs | None = None
        if not self.feature_columns:
            if model is not None:
                raise DataError(f"{name}: a bottom model was given but the table has no feature columns")
            return
        self.preprocessor = TablePreprocessor(
            categorical=categorical, scaling=settings.scaling, missing=settings.missing, seed=seed
        ).fit(features)
        self.inputs = self.preprocessor.transform(features)
        with PartyRng(derive_seed(seed, name, "init")):
            self.model = model or TabularMLP(
                cardinalities=self.preprocessor.cardinalities,
                n_numeric=self.preprocessor.n_numeric,
                hidden=settings.bottom_hidden,
                out_dim=settings.embedding_width,
                dropout=settings.dropout,
            )

    @property
    def has_features(self) -> bool:
        return self.model is not None

    def rows_of(self, rows: np.ndarray) -> Inputs:
        """This party's inputs for its own row indices ``rows`` (an alignment)."""
        assert self.inputs is not None
        index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        return self.inputs[0][index], self.inputs[1][index]

    def prepare(self, table: pd.DataFrame) -> tuple[np.ndarray, Inputs | None]:
        """IDs and model inputs of a new table (for scoring), with the preprocessing fitted in training."""
        check_table(self.name, table, id_column=self.id_column)
        ids = normalise_ids(table[self.id_column])
        if self.preprocessor is None:
            return ids, None
        return ids, self.preprocessor.transform(table)

    def optimizer(self, params: Sequence[nn.Parameter]) -> torch.optim.Optimizer:
        s = self.settings
        return make_optimizer(s.optimizer, params, lr=s.lr, weight_decay=s.weight_decay)


class FeatureParty(_Party):
    """A party with feature columns and no labels.

    Args:
        name: the party's name.
        table: its own table: an ID column and its feature columns.
        id_column: name of the customer-ID column.
        label: the label column's name, which this party must NOT have.
        settings: model and optimizer settings.
        categorical: the categorical columns (default: detect by dtype).
        model: a bottom model of your own, called as ``model(cat, num)``.
        seed: seed for this party's initial weights and random stream.
    """

    def __init__(
        self,
        name: str,
        table: pd.DataFrame,
        *,
        id_column: str = "customer_id",
        label: str | None = None,
        settings: ModelSettings = ModelSettings(),
        categorical: Sequence[str] | None = None,
        model: nn.Module | None = None,
        seed: int = 0,
    ) -> None:
        check_table(name, table, id_column=id_column, forbidden=[label] if label else [])
        super().__init__(
            name, table, id_column=id_column, drop=[], settings=settings, categorical=categorical, model=model,
            seed=seed,
        )
        if not self.has_features:
            raise DataError(f"{name}: a feature party needs at least one feature column besides {id_column!r}")

    def trainer(self, rows: np.ndarray, *, label_party: str, **hooks: object) -> FeatureTrainer:
        """The machine that trains this party's bottom on its aligned ``rows``."""
        assert self.model is not None
        return FeatureTrainer(
            name=self.name,
            label_party=label_party,
            model=self.model,
            optimizer=self.optimizer(list(self.model.parameters())),
            inputs=self.rows_of(rows),
            rng=self.rng,
            **hooks,  # type: ignore[arg-type]
        )

    def scorer(self, inputs: Inputs, *, label_party: str, chunk: int = 8192, **hooks: object) -> FeatureScorer:
        """The machine that sends this party's embeddings for scoring (``hooks``: its ``embedding_hooks``)."""
        assert self.model is not None
        return FeatureScorer(
            name=self.name, label_party=label_party, model=self.model, inputs=inputs, chunk=chunk,
            **hooks,  # type: ignore[arg-type]
        )


class LabelParty(_Party):
    """The party that holds the labels and the top model; it may have feature columns of its own, or none.

    Args:
        label: the label column (binary).
        positive_label: the value that counts as positive; detected for {0, 1}, {False, True} and {"no", "yes"}.
        Other arguments as for :class:`FeatureParty`.
    """

    def __init__(
        self,
        name: str,
        table: pd.DataFrame,
        *,
        label: str,
        id_column: str = "customer_id",
        positive_label: object = None,
        settings: ModelSettings = ModelSettings(),
        categorical: Sequence[str] | None = None,
        model: nn.Module | None = None,
        seed: int = 0,
    ) -> None:
        check_table(name, table, id_column=id_column, label=label)
        super().__init__(
            name,
            table,
            id_column=id_column,
            drop=[label],
            settings=settings,
            categorical=categorical,
            model=model,
            seed=seed,
        )
        self.label = label
        self.positive_label = positive_label if positive_label is not None else detect_positive(table[label], label)
        self.labels = binarise(table[label], self.positive_label, label)
        self.top: TopModel | None = None
        self.top_widths: dict[str, int] = {}

    def local_parts(self, rows: np.ndarray) -> dict[str, tuple[nn.Module, Inputs]]:
        """This party's own bottom and its inputs for aligned ``rows`` (empty if it has no features)."""
        return {self.name: (self.model, self.rows_of(rows))} if self.model is not None else {}

    def build_top(self, widths: Mapping[str, int]) -> TopModel:
        """Create the top model for embeddings of the given widths (a fresh one each call)."""
        with PartyRng(derive_seed(self.seed, self.name, "top")):
            self.top = TopModel(widths=widths, merge=self.settings.merge, hidden=self.settings.top_hidden)
        self.top_widths = dict(widths)
        return self.top

    def trainer(
        self,
        rows: np.ndarray,
        *,
        remote: Mapping[str, int],
        plan: Plan,
        extra_local: Mapping[str, tuple[nn.Module, Inputs]] | None = None,
        label_transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
        **options: object,
    ) -> LabelTrainer:
        """The machine that trains the top model on aligned ``rows`` against the ``remote`` parties.

        ``extra_local`` adds other parties' bottoms as local ones: the centralized baseline (no cut).
        ``label_transform`` maps the aligned labels before training (e.g. label differential privacy).
        """
        labels = self.labels[torch.from_numpy(np.asarray(rows, dtype=np.int64))]
        if label_transform is not None:
            labels = label_transform(labels)
        local = {**self.local_parts(rows), **(extra_local or {})}
        widths = {name: self.settings.embedding_width for name in local} | dict(remote)
        top = self.build_top(widths)
        params = [*top.parameters(), *(p for model, _ in local.values() for p in model.parameters())]
        return LabelTrainer(
            name=self.name,
            plan=plan,
            top=top,
            local=local,
            remote=remote,
            labels=labels,
            optimizer=self.optimizer(params),
            rng=self.rng,
            **options,  # type: ignore[arg-type]
        )

    def scorer(
        self,
        inputs: Inputs | None,
        *,
        remote: Mapping[str, int],
        n_rows: int,
        extra_local: Mapping[str, tuple[nn.Module, Inputs]] | None = None,
        chunk: int = 8192,
    ) -> LabelScorer:
        assert self.top is not None, "train before scoring"
        local = {self.name: (self.model, inputs)} if self.model is not None and inputs is not None else {}
        local.update(extra_local or {})
        return LabelScorer(name=self.name, top=self.top, local=local, remote=remote, n_rows=n_rows, chunk=chunk)

    def make_roles(self, rows: np.ndarray, *, validation_fraction: float, seed: int) -> np.ndarray:
        """Stratified choice of validation rows among the aligned ``rows`` (only the label party can stratify)."""
        y = self.labels[torch.from_numpy(np.asarray(rows, dtype=np.int64))].numpy()
        roles = np.full(len(rows), ROLE_TRAIN, dtype=np.uint8)
        rng = np.random.default_rng(derive_seed(seed, self.name, "validation"))
        for value in (0.0, 1.0):
            members = np.flatnonzero(y == value)
            take = round(validation_fraction * len(members))
            roles[rng.permutation(members)[:take]] = ROLE_VALID
        return roles
