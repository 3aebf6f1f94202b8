"""An ensemble run (``[model] kind = "ensemble"``) as the scoring service and the partner daemons hold it.

Theory of operation. The serving stack moves one vector per customer and keyed ID (:mod:`vsplit.serve.scorer`). An
ensemble's partner answers both parts in that one vector, so one round trip serves both: its networks' embeddings
(float32, as :class:`~vsplit.serve.model.PartnerModel` sends them, a bag's side by side) followed by its trees'
decision bits as 0.0/1.0 (:class:`~vsplit.serve.boost_model.BoostPartnerModel`'s, one per record). The bank splits
each answer at the networks' width, runs every network (:class:`~vsplit.serve.model.BankModel`) and walks its trees
(:class:`~vsplit.serve.boost_model.BoostBankModel`), and combines them as ``vsplit predict`` does (the run's weight on
the log-odds scale, :meth:`vsplit.node.ensemble.EnsembleNode.combine`), so a served score equals the batch one. With
``ensemble.second = "scorecard"`` the second part of the answer is the partner's points (one float32), added up by
:class:`~vsplit.serve.scorecard_model.ScorecardBankModel`.
The pair digest covers both parts' digests. A customer a partner does not know is scored by the bank's own model
saved with the run's networks (``networks/fallback.npz``, :mod:`vsplit.app.fallback`), as batch prediction scores
it (``"model": "bank_only"``); a run without one leaves it unscored.

Example:
    >>> ensemble_digest("r1", "a", "b") != ensemble_digest("r1", "a", "c")
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vsplit.config import PartyConfig
from vsplit.errors import ConfigError
from vsplit.serve.messages import pair_digest
from vsplit.serve.named import FromNode


def ensemble_digest(run_id: str, networks: str, trees: str) -> str:
    """The pair digest of a partner's part of an ensemble run: its networks' digest and its trees'."""
    return pair_digest(run_id, f"ensemble:{networks}:{trees}")


def load_ensemble_node(config: PartyConfig) -> Any:
    """This party's ensemble node with both parts' saved models loaded (as ``vsplit predict`` loads them)."""
    from vsplit.node.ensemble import EnsembleNode

    if config.privacy.defenses:
        raise ConfigError("privacy.defenses: serving does not apply defenses to embeddings, so its scores would "
                          "differ from batch prediction; serve a run trained without defenses")
    node = EnsembleNode(config, progress=False)
    node.load_model()
    return node


@dataclass
class EnsemblePartnerModel:
    """A partner's two parts of an ensemble run: answers each customer's embeddings, then its decision bits."""

    kind = "ensemble"

    node: Any
    networks: Any
    trees: Any
    run_id: str
    digest: str
    casefold: bool

    @classmethod
    def load(cls, config: PartyConfig, *, networks: Callable[[Any, PartyConfig], Any]) -> EnsemblePartnerModel:
        """``networks(node, config)``: the networks' partner model (:meth:`vsplit.serve.model.PartnerModel.of`)."""
        if config.party.role != "feature":
            raise ConfigError(f"party.role: the partner daemon serves a feature party, {config.party.name} is "
                              f"{config.party.role!r}; the bank runs the HTTP service (same command)")
        node = load_ensemble_node(config)
        nets = networks(node.nets, node.nets.config)
        trees = _second(node, bank=False).of(node.trees, node.trees.config)
        return cls(node=node, networks=nets, trees=trees, run_id=config.output.run_id,
                   digest=ensemble_digest(config.output.run_id, nets.digest, trees.digest),
                   casefold=config.psi.case_fold)

    @property
    def width(self) -> int:
        """Floats per customer: the networks' embeddings, then one per record of the trees (or one: the points)."""
        return int(self.networks.width + self.trees.width)

    @property
    def feature_columns(self) -> list[str]:
        return list(dict.fromkeys([*self.networks.feature_columns, *self.trees.feature_columns]))

    def embed(self, table: Any) -> tuple[list[str], np.ndarray]:
        """The canonical IDs of ``table`` and each customer's answer, float32 ``(rows, width)``: its embeddings, then
        its decision bits as 0.0/1.0 (or its points: float32 holds them to about 1e-5 of a point)."""
        ids, embeddings = self.networks.embed(table)
        same, bits = self.trees.embed(table)
        if same != ids:
            raise ConfigError(f"{self.node.name}: the networks and the trees read other customers of the same table")
        return ids, np.ascontiguousarray(np.concatenate([embeddings, bits.astype(np.float32)], axis=1))


def _second(node: Any, *, bank: bool) -> Any:
    """The serving model class of an ensemble's second part: the trees' or the scorecard's (``ensemble.second``)."""
    if node.second == "scorecard":
        from vsplit.serve.scorecard_model import ScorecardBankModel, ScorecardPartnerModel

        return ScorecardBankModel if bank else ScorecardPartnerModel
    from vsplit.serve.boost_model import BoostBankModel, BoostPartnerModel

    return BoostBankModel if bank else BoostPartnerModel


@dataclass
class EnsembleBankModel(FromNode):
    """The bank's networks and trees of an ensemble run, combined with the run's weight."""

    kind = "ensemble"

    node: Any
    networks: Any
    trees: Any
    run_id: str
    #: partner -> ("", answer width, pair digest), as :class:`~vsplit.serve.model.BankModel` says it
    partners: dict[str, tuple[str, int, str]]
    casefold: bool
    fallback: Any = None

    @classmethod
    def load(cls, config: PartyConfig, *, networks: Callable[[Any, PartyConfig], Any]) -> EnsembleBankModel:
        """``networks(node, config)``: the networks' bank model (:meth:`vsplit.serve.model.BankModel.of`)."""
        if config.party.role != "label":
            raise ConfigError(f"party.role: the scoring service runs at the label party, {config.party.name} is "
                              f"{config.party.role!r}")
        node = load_ensemble_node(config)
        nets = networks(node.nets, node.nets.config)
        trees = _second(node, bank=True).of(node.trees, node.trees.config)
        run_id = config.output.run_id
        partners = {p: ("", w + trees.partners[p][1], ensemble_digest(run_id, digest, trees.partners[p][2]))
                    for p, (_, w, digest) in nets.partners.items()}
        return cls(node=node, networks=nets, trees=trees, run_id=run_id, partners=partners,
                   casefold=config.psi.case_fold, fallback=nets.fallback)

    @property
    def columns(self) -> dict[str, str]:
        """The bank's own feature columns (the networks' and the trees', which read the same table) and their kind."""
        return {**self.trees.columns, **self.networks.columns}

    @property
    def nulls(self) -> bool:
        """Whether a bank column may be null in a request (the networks': ``data.missing`` is not ``"error"``)."""
        return bool(self.networks.nulls)

    def valid(self, values: np.ndarray) -> bool:
        """Whether a partner's answer holds finite float32 embeddings, then decision bits (0.0 or 1.0) only (the
        partner is not named: a partner whose answer has this width)."""
        if values.dtype != np.float32 or values.ndim != 2 or not np.isfinite(values).all():
            return False
        cuts = {self.networks.partners[p][1] for p, (_, w, _) in self.partners.items() if w == values.shape[1]}
        if self.node.second == "scorecard":  # finite points, one a customer
            return any(values.shape[1] - cut == 1 for cut in cuts)
        return any(bool(np.isin(values[:, cut:], (0.0, 1.0)).all()) for cut in cuts)

    def unseen(self, rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        """For each of ``rows``: the columns holding a category the networks' training never saw."""
        return list(self.networks.unseen(rows))

    def parts(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray]:
        """The mean network log-odds and the trees' margin (or the scorecard's log-odds) of ``rows`` with each
        partner's answers of them."""
        from vsplit.ensemble import log_odds

        nets, bits = {}, {}
        second = np.float64 if self.node.second == "scorecard" else np.uint8  # its points, or its decision bits
        for p, values in embeddings.items():
            w = self.networks.partners[p][1]
            nets[p], bits[p] = values[:, :w], np.asarray(values[:, w:], dtype=second)
        bank = self.networks
        networks = [(bank.node.party, bank.modules, bank.fast), *bank.more]
        logits = []
        for i, (party, modules, fast) in enumerate(networks):  # as BankModel.score, each network kept apart
            received = {}
            for p, v in nets.items():
                one = bank.partners[p][1] // len(networks)
                received[bank.partners[p][0]] = np.ascontiguousarray(v[:, i * one:(i + 1) * one], dtype=np.float32)
            logits.append(log_odds(bank._network(party, modules, fast, rows, received)))
        return np.mean(logits, axis=0), log_odds(self.trees.score(rows, bits))

    def score(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray]) -> np.ndarray:
        """The ensemble's probabilities of ``rows`` (validated bank columns) with each partner's answers of them."""
        networks, trees = self.parts(rows, embeddings)
        weight = self.node.weight
        return 1 / (1 + np.exp(-(weight * networks + (1 - weight) * trees)))

    def score_alone(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray | None:
        """The bank-only fallback's predictions of ``rows`` (the run's ``networks/fallback.npz``, as ``vsplit
        predict`` scores the customers a partner does not know), or ``None`` without one."""
        return self.networks.score_alone(rows)

    def explain_alone(self, rows: Sequence[Mapping[str, Any]]) -> Any:
        """The bank-only fallback's explanation of ``rows``, the reason codes of the applicants it scores
        (:meth:`vsplit.serve.model.BankModel.explain_alone`), or ``None`` without one."""
        return self.networks.explain_alone(rows)
