"""A boosted-trees run (``[model] kind = "boosting"``) as the scoring service and the partner daemons hold it.

Theory of operation. The serving stack moves one vector per customer and keyed ID (:mod:`vsplit.serve.scorer`): a
network's partner sends its embedding. A boosting partner sends its *decision bits* instead: one uint8 0/1 per record
it keeps (its winning splits of every tree, in its own record order), the answer of
:class:`~vsplit.boosting.messages.Decisions` for that customer (:meth:`vsplit.boosting.partner.PartnerModel.decisions`
on its own codes). Live mode asks them per micro-batch, cached mode holds every customer's in the partner's
snapshot; the partner's thresholds, bins and raw values never leave it. The bank walks its trees with its own codes
and those bits (:class:`~vsplit.boosting.forest.Forest`), so a served score equals ``vsplit predict``'s.

Which kind a run is comes from its saved model (:func:`model_kind`); :class:`BoostBankModel` and
:class:`BoostPartnerModel` answer what :class:`~vsplit.serve.model.BankModel` and
:class:`~vsplit.serve.model.PartnerModel` answer. The pair digest covers the run, the partner and how many records
it holds: a bank and a partner whose models do not pair refuse each other. There is no bank-only fallback for trees:
a customer a partner does not know is answered without a score (``"model": null``), as batch prediction lists it.

Example (not run: needs a trained run):
    >>> # model = BoostBankModel.load(load_config("parties/bank/party.toml"), run_id="trees-1")
    >>> # model.score([{"age": 41, "job": "admin."}], {"shop": bits})
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.config import PartyConfig, resolve
from vsplit.config.names import run_folder
from vsplit.errors import ConfigError
from vsplit.serve.messages import pair_digest
from vsplit.serve.named import FromNode


def model_kind(config: PartyConfig) -> str:
    """``"boosting"``, ``"scorecard"`` or ``"ensemble"`` if the saved model of ``config.output.run_id`` is one, else
    ``"network"`` (also when there is no readable model file: the network loader then says what is missing)."""
    from vsplit.serve.runs import _record

    try:
        folder = run_folder(resolve(config, config.output.dir), config.output.run_id, config.party.name)
    except ConfigError:
        return "network"
    meta = _record(folder / "model.npz") if (folder / "model.npz").is_file() else None
    tree = meta.get("tree") if isinstance(meta, dict) else None
    pairs = tree.get("__dict__") if isinstance(tree, dict) else None
    for kind in ("boosting", "scorecard", "ensemble"):
        if isinstance(pairs, list) and ["kind", kind] in pairs:
            return kind
    return "network"


def boost_digest(run_id: str, partner: str, records: int) -> str:
    """The pair digest of ``partner``'s part of a boosting run: the run, the partner and its record count.

    >>> boost_digest("r1", "shop", 12) != boost_digest("r1", "shop", 11)
    True
    """
    return pair_digest(run_id, f"boosting:{partner}:records={records}")


def load_boost_node(config: PartyConfig) -> Any:
    """This party's boosting node with its saved model loaded (as ``vsplit predict`` loads it)."""
    from vsplit.node.boost import BoostNode

    node = BoostNode(config, progress=False)
    node.load_model()
    return node


def decision_bits(values: np.ndarray) -> bool:
    """Whether ``values`` are decision bits: uint8, each 0 or 1."""
    return values.dtype == np.uint8 and (values.size == 0 or int(values.max()) <= 1)


@dataclass
class BoostPartnerModel:
    """A partner's records of a boosting run: answers each customer's decision bits."""

    node: Any
    run_id: str
    digest: str
    casefold: bool

    @classmethod
    def load(cls, config: PartyConfig) -> BoostPartnerModel:
        return cls.of(load_boost_node(config), config)

    @classmethod
    def of(cls, node: Any, config: PartyConfig) -> BoostPartnerModel:
        """The partner model of ``node``, a boosting node of ``config`` with its model loaded."""
        records = len(node.model.columns)
        return cls(node=node, run_id=config.output.run_id, casefold=config.psi.case_fold,
                   digest=boost_digest(config.output.run_id, config.party.name, records))

    @property
    def width(self) -> int:
        """Bits per customer: one per record."""
        return len(self.node.model.columns)

    @property
    def feature_columns(self) -> list[str]:
        return list(self.node.encoder.columns)

    def embed(self, table: Any) -> tuple[list[str], np.ndarray]:
        """The canonical IDs of ``table`` and each customer's decision bits, uint8 ``(rows, records)``."""
        from vsplit.psi.ids import IdPolicy, normalise_id

        node = self.node
        codes = node.bins.transform(node.encoder.transform(table[self.feature_columns]))
        bits = node.model.decisions(codes)
        ids = table[node.config.data.id_column].tolist()
        policy = IdPolicy(casefold=self.casefold)  # as vsplit.serve.model.canonical_ids: as PSI compares them
        canonical = [normalise_id(v, policy=policy, row=i) for i, v in enumerate(ids)]
        return canonical, np.ascontiguousarray(bits, dtype=np.uint8)


@dataclass
class BoostBankModel(FromNode):
    """The bank's trees of a boosting run, scoring rows with the partners' decision bits."""

    kind = "boosting"

    node: Any
    run_id: str
    #: partner -> ("", its record count, pair digest), as :class:`~vsplit.serve.model.BankModel` says it
    partners: dict[str, tuple[str, int, str]]
    forest: Any
    casefold: bool
    fallback: Any = None
    #: a value of a bank column may be null: missing values have a bin of their own
    nulls: bool = True
    #: the dtype of a partner's answers (``values`` of its replies and snapshots)
    answer_dtype: str = "uint8"

    @classmethod
    def load(cls, config: PartyConfig) -> BoostBankModel:
        if config.party.role != "label":
            raise ConfigError(f"party.role: the scoring service runs at the label party, {config.party.name} is "
                              f"{config.party.role!r}")
        return cls.of(load_boost_node(config), config)

    @classmethod
    def of(cls, node: Any, config: PartyConfig) -> BoostBankModel:
        """The bank model of ``node``, a boosting node of ``config`` with its model loaded."""
        from vsplit.boosting.forest import Forest

        forest = Forest.of(node.model, partners=len(node.partners))
        run_id = config.output.run_id
        partners = {p: ("", n, boost_digest(run_id, p, n)) for p, n in zip(node.partners, forest.records,
                                                                            strict=True)}
        return cls(node=node, run_id=run_id, partners=partners, forest=forest, casefold=config.psi.case_fold)

    @property
    def columns(self) -> dict[str, str]:
        """The bank's own feature columns and their kind (``categorical`` or ``numeric``), in model order."""
        encoder = self.node.encoder
        return {c: "categorical" if c in encoder.categories else "numeric" for c in encoder.columns}

    def valid(self, values: np.ndarray) -> bool:
        """Whether a partner's answer holds decision bits only."""
        return decision_bits(values)

    def codes(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The bank's bin codes of ``rows`` (validated columns; the encoder's arithmetic without a DataFrame)."""
        encoder = self.node.encoder
        values = np.empty((len(rows), len(encoder.columns)))
        for j, column in enumerate(encoder.columns):  # a loop over columns, then the batch's rows
            categories = encoder.categories.get(column)
            if categories is None:
                values[:, j] = [math.nan if r.get(column) is None else float(r[column]) for r in rows]
            else:
                index = self._index(column, categories)
                values[:, j] = [math.nan if r.get(column) is None else index.get(str(r[column]), -1) for r in rows]
        return self.node.bins.transform(values)

    def _index(self, column: str, categories: tuple[str, ...]) -> dict[str, int]:
        cache = self.__dict__.setdefault("_indexes", {})
        if column not in cache:
            cache[column] = {v: k for k, v in enumerate(categories)}
        return cache[column]

    def decisions(self, embeddings: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
        """Each partner's bits by its index in the trees (1, 2, ...)."""
        return {k: np.asarray(embeddings[p], dtype=np.uint8) for k, p in enumerate(self.partners, start=1)}

    def score(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray]) -> np.ndarray:
        """The trees' probabilities of ``rows`` with each partner's decision bits of them."""
        return self.forest.predict_proba(own_codes=self.codes(rows), decisions=self.decisions(embeddings))

    def score_alone(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """No bank-only model for trees: rows a partner does not know get no score."""
        return None

    def explain(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray],
                ids: Sequence[str]) -> Any:
        """The path attribution of ``rows`` (applicants ``ids``) from each partner's decision bits of them, the
        answers that scored them: ``vsplit explain``'s :func:`~vsplit.explain.path.explain_trees` of the same model,
        with no message beyond the scoring round's. The node values come once from the sums the model keeps
        (:func:`~vsplit.boosting.explain.kept_values`; a model saved without them raises its ``DataError``)."""
        from vsplit.boosting.explain import kept_values
        from vsplit.explain.path import explain_trees

        node = self.node
        values = self.__dict__.get("_values")
        if values is None:
            values = self.__dict__["_values"] = kept_values(node.model, node.params)
        return explain_trees(node.model, values, own_codes=self.codes(rows), decisions=self.decisions(embeddings),
                             ids=list(ids), own_columns=list(node.encoder.columns), partners=list(self.partners),
                             label_party=node.name)
