"""A scorecard run (``[model] kind = "scorecard"``) as the scoring service and the partner daemons hold it.

Theory of operation. The serving stack moves one vector per customer and keyed ID (:mod:`vsplit.serve.scorer`). A
scorecard partner's vector is one number: the customer's points from its own attributes (float64, as
``vsplit predict``'s :class:`~vsplit.scorecard.messages.PartnerPoints` carries them), computed from its WOE maps and
points table on its own table. Live mode asks for it per micro-batch; cached mode holds every customer's in the
partner's snapshot. Its bins, WOE values, coefficients and raw values never leave it. The bank adds the base points
(the intercept, which stays at the bank), its own attributes' points and each partner's, in the order batch
prediction adds them (:class:`~vsplit.scorecard.predict.LabelPoints`), and maps the score back to a probability
through the points scale: a served score equals ``vsplit predict``'s, points and probability.

Reason codes (``"reasons": k``, live mode) do not fit in one number: the bank cannot rank a partner's attributes
from its total. They run ``vsplit predict``'s own scoring round for the asked applicants
(:mod:`vsplit.serve.scorecard_reasons`), in which each partner answers its top-``k`` costliest attributes (named only
if its ``[scorecard] share_names`` is on, else ``#index``). There is no bank-only fallback: a customer a partner
does not know gets no score (``"model": null``), as batch prediction lists it.

Example:
    >>> scorecard_digest("r1", "shop", 3) != scorecard_digest("r1", "shop", 2)
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from vsplit.config import PartyConfig
from vsplit.errors import ConfigError
from vsplit.serve.messages import pair_digest
from vsplit.serve.named import FromNode


def scorecard_digest(run_id: str, partner: str, attributes: int) -> str:
    """The pair digest of ``partner``'s part of a scorecard run: the run, the partner and its attribute count."""
    return pair_digest(run_id, f"scorecard:{partner}:attributes={attributes}")


def load_scorecard_node(config: PartyConfig) -> Any:
    """This party's scorecard node with its saved model loaded (as ``vsplit predict`` loads it)."""
    from vsplit.node.scorecard import ScorecardNode

    node = ScorecardNode(config, progress=False)
    node.load_model()
    return node


def points_of(values: np.ndarray) -> bool:
    """Whether ``values`` are a scorecard partner's answers: float64, one finite number per customer."""
    return values.dtype == np.float64 and values.ndim == 2 and values.shape[1] == 1 and bool(np.isfinite(values).all())


def _codes(node: Any, table: pd.DataFrame) -> np.ndarray:
    """``table``'s coarse-bin codes of the node's selected attributes, as batch prediction computes them."""
    from vsplit.scorecard import columns_from_maps

    return columns_from_maps(node.maps, table).codes


@dataclass
class ScorecardPartnerModel:
    """A partner's scorecard of a run: answers each customer's points."""

    kind = "scorecard"
    node: Any
    run_id: str
    digest: str
    casefold: bool
    table: Any

    @classmethod
    def load(cls, config: PartyConfig) -> ScorecardPartnerModel:
        if config.party.role != "feature":
            raise ConfigError(f"party.role: the partner daemon serves a feature party, {config.party.name} is "
                              f"{config.party.role!r}; the bank runs the HTTP service (same command)")
        return cls.of(load_scorecard_node(config), config)

    @classmethod
    def of(cls, node: Any, config: PartyConfig) -> ScorecardPartnerModel:
        """The partner model of ``node``, a scorecard node of ``config`` with its model loaded (an ensemble's part
        too, :mod:`vsplit.serve.ensemble_model`)."""
        return cls(node=node, run_id=config.output.run_id, casefold=config.psi.case_fold, table=node.points_table(),
                   digest=scorecard_digest(config.output.run_id, config.party.name, len(node.maps)))

    @property
    def width(self) -> int:
        """One number per customer: its points."""
        return 1

    @property
    def feature_columns(self) -> list[str]:
        return [m.name for m in self.node.maps]

    def embed(self, table: pd.DataFrame) -> tuple[list[str], np.ndarray]:
        """The canonical IDs of ``table`` and each customer's points, float64 ``(rows, 1)``."""
        from vsplit.psi.ids import IdPolicy, normalise_id

        ids = table[self.node.config.data.id_column].tolist()
        policy = IdPolicy(casefold=self.casefold)  # as vsplit.serve.model.canonical_ids: as PSI compares them
        canonical = [normalise_id(v, policy=policy, row=i) for i, v in enumerate(ids)]
        points = self.table.score(_codes(self.node, table))
        return canonical, np.ascontiguousarray(points[:, None], dtype=np.float64)

    def reasons_machine(self, codes: np.ndarray) -> Any:
        """``vsplit predict``'s partner side of the scoring round for the customers of ``codes`` (their bins): it
        answers their points and their costliest attributes (named only with ``[scorecard] share_names``)."""
        from vsplit.scorecard import PartnerPointsMachine

        return PartnerPointsMachine(self.table, codes=codes, label=self.node.hub, share_reasons=True,
                                    share_names=self.node.config.scorecard.share_names)

    def codes(self, table: pd.DataFrame) -> np.ndarray:
        """Each row of ``table``'s bins of this partner's attributes."""
        return _codes(self.node, table)


@dataclass
class ScorecardBankModel(FromNode):
    """The bank's scorecard of a run: its points table, the base points, the scale; scores rows with the partners'
    points."""

    kind = "scorecard"
    node: Any
    run_id: str
    #: partner -> ("", 1, pair digest), as :class:`~vsplit.serve.model.BankModel` says it
    partners: dict[str, tuple[str, int, str]]
    table: Any
    base_points: float
    casefold: bool
    fallback: Any = None
    #: a missing value has a bin of its own
    nulls: bool = True

    @classmethod
    def load(cls, config: PartyConfig) -> ScorecardBankModel:
        if config.party.role != "label":
            raise ConfigError(f"party.role: the scoring service runs at the label party, {config.party.name} is "
                              f"{config.party.role!r}")
        return cls.of(load_scorecard_node(config), config)

    @classmethod
    def of(cls, node: Any, config: PartyConfig) -> ScorecardBankModel:
        """The bank model of ``node``, a scorecard node of ``config`` with its model loaded (an ensemble's part too)."""
        run_id = config.output.run_id
        partners = {p: ("", 1, scorecard_digest(run_id, p, int(node.cards.get(p, {}).get("attributes", -1))))
                    for p in node.partners}
        return cls(node=node, run_id=run_id, partners=partners, table=node.points_table(),
                   base_points=node.scaling.base_points(node.intercept), casefold=config.psi.case_fold)

    @property
    def columns(self) -> dict[str, str]:
        """The bank's own attributes of the scorecard and their kind (``categorical`` or ``numeric``)."""
        from vsplit.woe.fine import CATEGORY

        return {m.name: "categorical" if m.fine.kind == CATEGORY else "numeric" for m in self.node.maps}

    def valid(self, values: np.ndarray) -> bool:
        """Whether a partner's answer holds points only: float64, finite, one a customer."""
        return points_of(values)

    def codes(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The bank's bins of ``rows`` (validated columns), as batch prediction bins its table."""
        frame = pd.DataFrame({c: [r.get(c) for r in rows] for c in self.columns})
        for column, kind in self.columns.items():
            if kind == "numeric":
                frame[column] = frame[column].astype("float64")
        return _codes(self.node, frame)

    def points(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray]) -> np.ndarray:
        """Each row's score in points: the base points plus the bank's and every partner's points, added in the
        order :class:`~vsplit.scorecard.predict.LabelPoints` adds them."""
        return self.base_points + sum(self._by_party(self.codes(rows), embeddings).values())

    def _by_party(self, codes: np.ndarray, embeddings: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each party's points of the rows of ``codes`` (the bank's bins), the bank's first."""
        own = self.table.score(codes) if self.table.names else np.zeros(len(codes))
        return {self.name: own} | {p: np.asarray(embeddings[p], dtype=np.float64)[:, 0] for p in self.partners}

    def score(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray]) -> np.ndarray:
        """The probabilities of ``rows`` with each partner's points of them (``vsplit predict``'s)."""
        from vsplit.scorecard import sigmoid

        return sigmoid(self.node.scaling.log_odds(self.points(rows, embeddings)))

    def score_alone(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """No bank-only model for a scorecard: rows a partner does not know get no score."""
        return None

    def explain(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray],
                ids: Sequence[str]) -> Any:
        """The explanation of ``rows`` (applicants ``ids``) from each partner's points of them, the answers that
        scored them: ``vsplit explain``'s :func:`~vsplit.explain.points.points_explanation` (the bank's attributes
        from its points table, each partner as one group; an ensemble's second part)."""
        from vsplit.explain.points import points_explanation
        from vsplit.scorecard.predict import ScoredPoints

        codes = self.codes(rows)
        by_party = self._by_party(codes, embeddings)
        points = ScoredPoints(score=self.base_points + sum(by_party.values()), by_party=by_party)
        node = self.node
        return points_explanation(points, label_party=self.name, ids=ids, own=self.table, own_codes=codes,
                                  scaling=node.scaling, intercept=node.intercept)
