"""What the two PSI party machines share: finishing with an :class:`Alignment` or failing with an abort code.

A machine that fails on its own data (duplicates, missing IDs, no overlap) does not raise from ``receive``: it
returns an :class:`Abort` for every peer, so the peers learn the precise code (``BAD_DATA``, ``NO_OVERLAP``) and
nothing else, and marks itself done. Reading :attr:`PartyMachine.result` then raises the detailed local error. A
peer that breaks the protocol makes ``receive`` raise :class:`ProtocolError`, and the pump sends its code.
"""

from __future__ import annotations

import numpy as np

from vsplit.data.id_sources import IdSource
from vsplit.errors import AlignmentError, VsplitError
from vsplit.protocol.abort import Abort, AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.psi.alignment import Alignment, PsiStats
from vsplit.psi.exchange import PairExchange
from vsplit.psi.ids import IdPolicy, normalise_id


class PartyMachine:
    """Base of :class:`~vsplit.psi.label.LabelParty` and :class:`~vsplit.psi.partner.Partner`."""

    def __init__(self, *, source: IdSource, policy: IdPolicy) -> None:
        self._source = source
        self._policy = policy
        self._done = False
        self._result: Alignment | None = None
        #: The local error that ended the run, if any (also raised by :attr:`result`).
        self.error: VsplitError | None = None

    @property
    def done(self) -> bool:
        """True once the machine has its alignment or has failed."""
        return self._done

    @property
    def result(self) -> Alignment:
        """This party's :class:`Alignment`; raises the local error if the run failed."""
        if self.error is not None:
            raise self.error
        if self._result is None:
            raise AlignmentError("the PSI run has not finished; drive the machine until done")
        return self._result

    def _fail(self, code: AbortCode, error: VsplitError, peers: list[str]) -> list[Outgoing]:
        self._done = True
        self.error = error
        return [Outgoing(peer, Abort(code=int(code))) for peer in peers]

    def _no_overlap(self, pairs: list[PairExchange], peers: list[str]) -> list[Outgoing]:
        sizes = ", ".join(f"{p.peer} has {p.peer_total}" for p in pairs)
        error = AlignmentError(
            f"{self._source.name}: no customer is shared by all parties (this side has {pairs[0].size} IDs, {sizes}); "
            "check that every party's data.id_column holds the same kind of IDs and that all set the same "
            "psi.case_fold, then retry"
        )
        return self._fail(AbortCode.NO_OVERLAP, error, peers)

    def _finish(self, rows: np.ndarray, pairs: list[PairExchange]) -> None:
        first = pairs[0].prepared
        assert first is not None
        raw = self._source.values_at(rows)  # no Python list of the rows: most sources keep no values
        ids = None if raw is None else [normalise_id(v, policy=self._policy) for v in raw]
        stats = PsiStats(
            rows=first.rows_read,
            size=pairs[0].size,
            peer_sizes={p.peer: int(p.peer_total or 0) for p in pairs},
            intersection=len(rows),
            duplicates=first.duplicates,
            points_sent=sum(p.points_sent for p in pairs),
            points_received=sum(p.points_received for p in pairs),
            resumed={p.peer: p.resumed_from for p in pairs},
        )
        self._result = Alignment(rows=rows.astype(np.int64, copy=False), ids=ids, stats=stats)
        self._done = True
        for pair in pairs:  # keep only the result
            pair.prepared = None
