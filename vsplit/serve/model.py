"""A party's trained model, loaded for online scoring: the bank's own layers and top, or a partner's bottom.

Theory of operation. Serving reuses batch prediction's loading: :class:`~vsplit.node.PartyNode` builds the party from
its config (the training table gives the columns and the network's shapes) and ``load_model()`` reads the saved
``model.npz`` of run ``run_id``; the bank also loads its bank-only fallback (``fallback.npz``,
:mod:`vsplit.app.fallback`). Scoring then runs the same modules in the same order as the scoring machine does, in
one process: a partner computes its bottom's embeddings (through its cut codec, as on the wire); the bank runs its
own bottom, merges the partners' embeddings into its top and applies the task's link. So a served score equals the
batch ``vsplit predict`` score of the same row.

Only vertical splits serve (the bank holds the top and the labels; each partner one bottom). Defenses that alter
embeddings at scoring time (``privacy.defenses``) are refused: a served score would differ from the batch one.

A bag of networks (``train.networks``, :mod:`vsplit.bagging`) serves as batch prediction scores it: a partner sends,
per customer, each network's embedding side by side (``networks`` times the width of one), the bank runs each
network's bottom and top on its slice and serves the mean of the networks' probabilities. The bag's size is part of
the pair digest, so a bank and a partner holding bags of different sizes refuse to pair.

Example (not run: needs a trained run):
    >>> # bank = BankModel.load(load_config("parties/bank/party.toml"), run_id="pilot")
    >>> # bank.score(frame, {"partner": embeddings})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from vsplit.config import PartyConfig
from vsplit.errors import ConfigError
from vsplit.serve.messages import pair_digest
from vsplit.serve.named import FromNode

#: rows per forward pass when a partner embeds its whole table
CHUNK = 8192


def version_config(config: PartyConfig, run_id: str | None) -> PartyConfig:
    """``config`` with ``output.run_id`` set to ``run_id`` (a model version is a trained run, by its ID)."""
    if not run_id or run_id == config.output.run_id:
        return config
    return dataclasses.replace(config, output=dataclasses.replace(config.output, run_id=run_id))


def load_node(config: PartyConfig) -> Any:
    """This party's node with its saved model of ``config.output.run_id`` loaded (as ``vsplit predict`` does)."""

    from vsplit.node import PartyNode

    if config.topology.kind != "vertical":
        raise ConfigError(f"topology.kind: vsplit serve scores vertical splits, not {config.topology.kind!r}")
    if config.privacy.defenses:
        raise ConfigError("privacy.defenses: serving does not apply defenses to embeddings, so its scores would "
                          "differ from batch prediction; serve a run trained without defenses")
    node = PartyNode(config, progress=False)
    node.load_model()
    return evaluating(node)


def evaluating(node: Any) -> Any:
    """``node`` (a network node, its model loaded) with every network's modules in evaluation mode."""
    for party in node.networks:
        for module in party.modules_for(node.topology, task_width=_width(party)).values():
            module.eval()
    return node


def bag_digest(run_id: str, view: str, networks: int) -> str:
    """:func:`~vsplit.serve.messages.pair_digest` of a model of ``networks`` networks (one: the plain digest)."""
    return pair_digest(run_id, view if networks == 1 else f"{view}:networks={networks}")


def _width(party: Any) -> int:
    return party.task_width if hasattr(party, "task_width") else 1


def canonical_ids(values: Sequence[Any], *, casefold: bool) -> list[str]:
    """IDs as PSI compares them (:func:`vsplit.psi.ids.normalise_id`): NFC, stripped, case-folded if configured."""
    from vsplit.psi.ids import IdPolicy, normalise_id

    policy = IdPolicy(casefold=casefold)
    return [normalise_id(v, policy=policy, row=i) for i, v in enumerate(values)]


def forward(topology: Any, me: str, modules: Mapping[str, Any], inputs: Any,
            received: Mapping[str, Any]) -> Any:
    """Run ``me``'s segments of ``topology`` in order on ``inputs`` (its own rows' tensors), with the other parties'
    segment outputs in ``received`` (segment name -> tensor): the loss segment's output (no autograd)."""
    import torch

    with torch.inference_mode():
        return _forward(topology, me, modules, inputs, received)


def _forward(topology: Any, me: str, modules: Mapping[str, Any], inputs: Any, received: Mapping[str, Any]) -> Any:
    ctx: dict[str, Any] = dict(received)
    for seg in topology.segments:
        if seg.owner != me:
            continue
        module = modules[seg.name]
        if seg.is_source:
            ctx[seg.name] = module(*inputs)
        elif len(seg.inputs) == 1:
            value = ctx[seg.inputs[0]]
            ctx[seg.name] = module(*value) if type(value) is tuple else module(value)
        else:
            ctx[seg.name] = module({i: ctx[i] for i in seg.inputs})
    return ctx[topology.loss_segment.name]


@dataclass
class PartnerModel:
    """A partner's bottom for run ``run_id``: embeds its customers as its training run's cut carries them."""

    node: Any
    run_id: str
    digest: str
    segment: str
    cut: Any
    casefold: bool

    @classmethod
    def load(cls, config: PartyConfig, run_id: str | None = None) -> Any:
        config = version_config(config, run_id)
        if _boosting(config):  # the run's saved model says it holds trees
            from vsplit.serve.boost_model import BoostPartnerModel

            return BoostPartnerModel.load(config)
        if _kind(config) == "scorecard":  # the run's saved model says it holds a scorecard
            from vsplit.serve.scorecard_model import ScorecardPartnerModel

            return ScorecardPartnerModel.load(config)
        if _kind(config) == "ensemble":  # networks and trees: both parts' answers, side by side
            from vsplit.serve.ensemble_model import EnsemblePartnerModel

            return EnsemblePartnerModel.load(config, networks=cls.of)
        if config.party.role != "feature":
            raise ConfigError(f"party.role: the partner daemon serves a feature party, {config.party.name} is "
                              f"{config.party.role!r}; the bank runs the HTTP service (same command)")
        return cls.of(load_node(config), config)

    @classmethod
    def of(cls, node: Any, config: PartyConfig) -> PartnerModel:
        """The partner model of ``node``, a network node of ``config`` with its model loaded (:func:`load_node`)."""
        evaluating(node)
        me = config.party.name
        (cut,) = node.topology.cuts_out_of(me)
        digest = bag_digest(config.output.run_id, node.topology.view_fingerprint(me), len(node.networks))
        return cls(node=node, run_id=config.output.run_id, digest=digest, segment=cut.src, cut=cut,
                   casefold=config.psi.case_fold)

    @property
    def width(self) -> int:
        """Floats per customer: one network's cut width, times the networks of a bag."""
        return int(np.prod(self.cut.shapes[0])) * len(self.node.networks)

    @property
    def feature_columns(self) -> list[str]:
        return list(self.node.feature_columns)

    def embed(self, table: pd.DataFrame) -> tuple[list[str], np.ndarray]:
        """The canonical IDs of ``table`` and their embeddings (float32, as the cut's codec delivers them)."""
        import torch

        from vsplit.protocol.training.compression import Compressor, values_of
        from vsplit.protocol.training.messages import PREDICT

        one = self.width // len(self.node.networks)
        codec = Compressor(self.node.config.network.compression)
        ids, networks = None, []
        for party in self.node.networks:  # a bag: each network's embeddings, side by side
            ids, inputs = party.prepare(table)
            module = party.modules_for(self.node.topology)[self.segment]
            parts = []
            with torch.inference_mode():
                for start in range(0, len(ids), CHUNK):
                    out = module(*[t[start:start + CHUNK] for t in inputs])
                    parts.append(np.ascontiguousarray(out.numpy(), dtype=np.float32))
            values = np.concatenate(parts) if parts else np.zeros((0, one), np.float32)
            networks.append(values_of(codec.pack_activations(self.cut.id, 0, PREDICT, 0, 0, values)))
        values = np.ascontiguousarray(np.concatenate(networks, axis=1), dtype=np.float32)
        return canonical_ids(list(ids), casefold=self.casefold), values


@dataclass
class BankModel(FromNode):
    """The bank's model of run ``run_id``: its bottom and top, the partners' cuts, and the bank-only fallback."""

    node: Any
    run_id: str
    modules: dict[str, Any]
    #: partner -> (its segment feeding the bank, embedding width, pair digest)
    partners: dict[str, tuple[str, int, str]]
    fallback: Any
    casefold: bool
    #: the label party's calibration of the split's probabilities (``vsplit calibrate``), as ``vsplit predict``
    #: applies it; ``None`` without one
    calibrator: Any = None
    #: the forward pass in numpy (:mod:`vsplit.serve.numpy_forward`) of the split and of the fallback; ``None``
    #: where a module is not supported (PyTorch's forward then)
    fast: Any = None
    fast_alone: Any = None
    #: networks 2..N of a bag (``train.networks``): each its party, modules and numpy forward (or ``None``)
    more: list[tuple[Any, dict[str, Any], Any]] = dataclasses.field(default_factory=list)

    @classmethod
    def load(cls, config: PartyConfig, run_id: str | None = None) -> Any:
        config = version_config(config, run_id)
        if _boosting(config):  # the run's saved model says it holds trees
            from vsplit.serve.boost_model import BoostBankModel

            return BoostBankModel.load(config)
        if _kind(config) == "scorecard":  # the run's saved model says it holds a scorecard
            from vsplit.serve.scorecard_model import ScorecardBankModel

            return ScorecardBankModel.load(config)
        if _kind(config) == "ensemble":  # networks and trees, combined with the run's weight
            from vsplit.serve.ensemble_model import EnsembleBankModel

            return EnsembleBankModel.load(config, networks=cls.of)
        if config.party.role != "label":
            raise ConfigError(f"party.role: the scoring service runs at the label party, {config.party.name} is "
                              f"{config.party.role!r}")
        return cls.of(load_node(config), config)

    @classmethod
    def of(cls, node: Any, config: PartyConfig) -> BankModel:
        """The bank model of ``node``, a network node of ``config`` with its model loaded (:func:`load_node`)."""
        evaluating(node)
        me, topology = config.party.name, node.topology
        bag = len(node.networks)
        partners = {c.src_owner: (c.src, int(np.prod(c.shapes[0])) * bag,
                                  bag_digest(config.output.run_id, topology.view_fingerprint(c.src_owner), bag))
                    for c in topology.cuts_into(me)}
        modules = node.party.modules_for(topology, task_width=node.party.task_width)
        from vsplit.explain.calibration import FILE, Calibrator
        from vsplit.serve.numpy_forward import compile_forward

        more = []
        for party in node.networks[1:]:
            own = party.modules_for(topology, task_width=party.task_width)
            more.append((party, own, compile_forward(topology, me, own)))

        saved = node.folder / FILE
        fallback = _load_fallback(node)
        alone = None
        if fallback is not None:
            alone = compile_forward(fallback.run, fallback.party.name,
                                    fallback.party.modules_for(fallback.run, task_width=fallback.party.task_width))
        return cls(node=node, run_id=config.output.run_id, modules=modules, partners=partners, fallback=fallback,
                   casefold=config.psi.case_fold, calibrator=Calibrator.load(saved) if saved.is_file() else None,
                   fast=compile_forward(topology, me, modules), fast_alone=alone, more=more)

    @property
    def nulls(self) -> bool:
        """Whether a bank column may be null in a request (``data.missing`` is not ``"error"``)."""
        return self.node.config.data.missing != "error"

    def valid(self, values: np.ndarray) -> bool:
        """Whether a partner's answer holds embeddings: float32, every value finite."""
        return values.dtype == np.float32 and bool(np.isfinite(values).all())

    @property
    def columns(self) -> dict[str, str]:
        """The bank's own feature columns and their kind (``categorical`` or ``numeric``), in model order."""
        prep = self.node.party.preprocessor
        if prep is None:
            return {}
        return {c: "categorical" if c in prep.categorical_ else "numeric" for c in self.node.party.feature_columns}

    def unseen(self, rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        """For each of ``rows`` (validated bank columns): the columns holding a category training never saw."""
        from vsplit.data.unseen import unseen_in_rows

        return unseen_in_rows(self.node.party.preprocessor, rows)

    def score(self, rows: Sequence[Mapping[str, Any]], embeddings: Mapping[str, np.ndarray]) -> np.ndarray:
        """The split's predictions of ``rows`` (validated bank columns) with each partner's embeddings of them; a
        bag's: the mean of its networks' predictions, network ``i`` on slice ``i`` of each partner's embeddings."""
        networks = [(self.node.party, self.modules, self.fast), *self.more]
        probas = []
        for i, (party, modules, fast) in enumerate(networks):
            received = {}
            for p, v in embeddings.items():
                one = self.partners[p][1] // len(networks)
                received[self.partners[p][0]] = np.ascontiguousarray(v[:, i * one:(i + 1) * one], dtype=np.float32)
            probas.append(self._network(party, modules, fast, rows, received))
        proba = probas[0] if len(probas) == 1 else np.mean(probas, axis=0)
        return self.calibrator.apply(proba) if self.calibrator is not None and proba.ndim == 1 else proba

    def _network(self, party: Any, modules: Mapping[str, Any], fast: Any, rows: Sequence[Mapping[str, Any]],
                 received: Mapping[str, np.ndarray]) -> np.ndarray:
        """One network's predictions of ``rows`` with the partners' embeddings ``received`` (by segment)."""
        import torch

        if fast is not None:
            out = torch.from_numpy(fast(encode_rows(party, rows, id_column=self.id_column, arrays=True), received))
        else:
            out = forward(self.node.topology, self.name, modules, encode_rows(party, rows, id_column=self.id_column),
                          {k: torch.from_numpy(v) for k, v in received.items()})
        return np.asarray(party.task.predict(out), dtype=np.float64)

    def score_alone(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray | None:
        """The bank-only fallback's predictions of ``rows``, or ``None`` without a fallback model."""
        model = self.fallback
        if model is None:
            return None
        if model.logistic is not None and model.chosen == "logistic_regression":  # the bank's chosen own model
            return model.logistic.proba(encode_rows(model.party, rows, id_column=self.id_column, arrays=True))
        if model.booster is not None and model.chosen == "boosted_trees":
            return model.booster.proba(encode_rows(model.party, rows, id_column=self.id_column, arrays=True))
        if self.fast_alone is not None:
            import torch

            out = torch.from_numpy(self.fast_alone(encode_rows(model.party, rows, id_column=self.id_column,
                                                               arrays=True), {}))
        else:
            modules = model.party.modules_for(model.run, task_width=model.party.task_width)
            out = forward(model.run, model.party.name, modules, encode_rows(model.party, rows,
                                                                            id_column=self.id_column), {})
        return np.asarray(model.party.task.predict(out), dtype=np.float64)

    def explain_alone(self, rows: Sequence[Mapping[str, Any]]) -> Any:
        """The bank-only fallback's explanation of ``rows`` (validated bank columns), the attributions the reason
        codes of the applicants it scores come from (:func:`vsplit.app.fallback.explain_bank_only`; IDs are the
        rows' positions), or ``None`` without a fallback model."""
        if self.fallback is None:
            return None
        from vsplit.app.fallback import explain_bank_only

        return explain_bank_only(self.fallback, _frame(self.fallback.party, rows, id_column=self.id_column))


def _frame(party: Any, rows: Sequence[Mapping[str, Any]], *, id_column: str) -> pd.DataFrame:
    """``rows`` as ``party``'s table, its IDs the rows' positions (two rows may be the same customer)."""
    columns = list(party.feature_columns)
    frame = pd.DataFrame({id_column: [str(i) for i in range(len(rows))],
                          **{c: [r.get(c) for r in rows] for c in columns}})
    prep = party.preprocessor
    for c in columns:
        if prep is not None and c in prep.numeric_:
            frame[c] = frame[c].astype("float64")
    return frame


def encode_rows(party: Any, rows: Sequence[Mapping[str, Any]], *, id_column: str, arrays: bool = False) -> Any:
    """``party``'s model inputs of ``rows`` (tensors; numpy arrays if ``arrays``): the fast path
    (:class:`~vsplit.serve.encode.RowEncoder`) where the preprocessing allows it, else the table path batch
    prediction takes (:meth:`~vsplit.party.LabelParty.prepare`)."""
    from vsplit.serve.encode import RowEncoder

    prep = party.preprocessor
    if RowEncoder.supports(prep):
        encoder = getattr(party, "_serve_encoder", None)
        if encoder is None or encoder.prep is not prep:
            encoder = RowEncoder(prep)
            party._serve_encoder = encoder
        return encoder.arrays(rows) if arrays else encoder.encode(rows)
    # positions as IDs: two requests of one micro-batch may score the same customer
    inputs = party.prepare(_frame(party, rows, id_column=id_column))[1]
    return tuple(t.numpy() for t in inputs) if arrays else inputs


def _boosting(config: PartyConfig) -> bool:
    return _kind(config) == "boosting"


def _kind(config: PartyConfig) -> str:
    from vsplit.serve.boost_model import model_kind

    return model_kind(config)


def _load_fallback(node: Any) -> Any:
    """The bank-only model saved with the run (as batch prediction loads it), or ``None``."""
    from vsplit.app.fallback import FILE, load_bank_only

    saved = node.folder / FILE
    if not saved.is_file() or node.table is None:
        return None
    model = load_bank_only(saved, lambda trained: node._build_party(node.table, trained=trained),
                           run_id=node.config.output.run_id, party=node.name)
    for module in model.party.modules_for(model.run, task_width=model.party.task_width).values():
        module.eval()
    return model
