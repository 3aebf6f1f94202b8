"""The base of a vertical party that reads its own table whole and runs a homomorphic protocol over it: the
boosted trees (:mod:`vsplit.node.boost`), WOE binning (:mod:`vsplit.node.woe`) and the scorecard
(:mod:`vsplit.node.scorecard`).

Each holds its table, the run's topology, the label party's partners, PSI configured as a network run's
(:class:`~vsplit.node.aligned.AlignedNode`'s settings and backend), and refuses to start without the ``he`` extra,
naming what needed it (:attr:`OwnTableNode.needs_he`), before any peer is reached. After training, the label party
says whether its test table is scored next (:meth:`OwnTableNode.then_score`), so a partner without a test table of its
own scores from its training table.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.config import PartyConfig, resolve
from vsplit.config.topology import topology_of
from vsplit.errors import ConfigError
from vsplit.node.aligned import AlignedNode
from vsplit.node.node import PartyNode
from vsplit.node.outputs import Scores
from vsplit.transport.channel import Channel


class OwnTableNode(PartyNode):
    """A party of a vertical split over its own table (``data.path``, read whole) with a homomorphic protocol."""

    psi_settings = AlignedNode.psi_settings
    open_psi_backend = AlignedNode.open_psi_backend
    _test_table = AlignedNode._test_table
    _test_table_to_score = AlignedNode._test_table_to_score
    #: what the missing ``he`` extra's error names, e.g. ``model.kind = "boosting"``
    needs_he = ""
    #: the model's name in ``predict.json`` (``boosting``, ``scorecard``)
    model_kind = ""

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        super().__init__(config, resume=resume, progress=progress)
        from vsplit.data.sources import read_table

        d = config.data
        self.table = read_table(resolve(config, d.path), id_column=d.id_column, features=d.features, label=d.label)
        self.topology = topology_of(config)
        self.partners: list[str] = list(config.network.peers) if self.role == "label" else []
        self._psi_backend: Any = None

    @property
    def feature_columns(self) -> list[str]:
        d = self.config.data
        return [str(c) for c in self.table.columns if c not in (d.id_column, d.label)]

    @property
    def hub(self) -> str:
        """The label party's name (a partner's one peer)."""
        return self.name if self.role == "label" else next(iter(self.config.network.peers))

    def before_connect(self) -> None:
        from vsplit.he._lib import _HINT, heu_available

        if not heu_available():
            raise ConfigError(f"{self.needs_he}: {_HINT}")

    def then_score(self) -> Any:
        """After training: the label party tells every partner whether its test table is scored next
        (:mod:`vsplit.protocol.then_score`), and every party scores it if so (a partner without ``data.test_path``
        from its training table); the outcome is the scored table (``score_session``'s) or ``None``."""
        from vsplit.protocol.then_score import LabelThenScore, PartnerThenScore

        if self.role == "label":
            test = self._test_table()
            source = resolve(self.config, self.config.data.test_path or "")
            yield "then score", LabelThenScore(test is not None, partners=self.partners)
        else:
            follows = yield "then score", PartnerThenScore(label=self.hub)
            test, source = self._test_table_to_score() if follows else (None, None)
        if test is None:
            return None
        return (yield from self.score_session(test, source=source, psi_stage="test psi"))

    def score_table(self, table: Any, *, channels: Mapping[str, Channel] | None = None,
                    peers: list[str] | None = None, psi_state: Path | None = None,
                    source: Path | None = None) -> Scores:
        """Score ``table``'s customers with the saved model (``vsplit predict``): this node's ``score_session`` with
        the peers; the label party gets the probabilities of the customers every party knows."""
        assert table is not None
        started = time.perf_counter()
        scored, communication = self.exchange(self.score_session(table, psi_state=psi_state, source=source),
                                              channels=channels, peers=peers)
        out = Scores(seconds={"predict": round(time.perf_counter() - started, 3)}, communication=communication,
                     summary={"psi": scored.psi, "model": self.model_kind})
        if self.role == "label":
            out.ids = [str(v) for v in scored.ids]
            out.by_id = dict(zip([out.ids[r] for r in scored.rows], np.asarray(scored.proba).tolist(), strict=True))
        return out
