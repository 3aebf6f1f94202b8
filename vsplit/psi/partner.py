"""A partner's PSI machine: one exchange with the label party, then its rows in the agreed order.

With two parties and ``reveal="both"`` the partner finds the overlap itself and orders it by double-blinded value,
exactly as the label party does. Otherwise (``reveal="label_party"``, or more than two parties) it waits for the
label party's :class:`Selected` positions - in its own sent order, so it can map them to rows and nobody sends an
ID. Under ``reveal="both"`` it also checks that every selected row is in the overlap it found itself.

Example:
    >>> from vsplit.psi.label import LabelParty
    >>> from vsplit.runtime.inprocess import connect, run_machines
    >>> pumps = connect(["bank", "shop"], session=b"s" * 16)
    >>> cfg = PsiConfig(reveal="label_party")
    >>> out = run_machines(pumps, {"bank": LabelParty([1, 2, 3], partners=["shop"], config=cfg),
    ...                            "shop": Partner(["3", "2", "9"], label_party="bank", config=cfg)})
    >>> [out["shop"].take(["3", "2", "9"]) == out["bank"].ids, out["shop"].rows.dtype]
    [True, dtype('int64')]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsplit.data.id_sources import IdSource, as_source
from vsplit.errors import AlignmentError, DataError, ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.psi.config import PsiConfig
from vsplit.psi.exchange import NothingToAlign, PairExchange, violation
from vsplit.psi.ids import IdPolicy
from vsplit.psi.matches import agreed_order
from vsplit.psi.messages import Selected
from vsplit.psi.parallel import Backend, SerialBackend
from vsplit.psi.party import PartyMachine
from vsplit.psi.resume import PairState


class Partner(PartyMachine):
    """A partner's machine (sans-IO).

    Args:
        ids: this party's IDs in table order: a sequence, or an :class:`IdSource` such as ``ParquetIds``.
        label_party: the label party's name.
        config: settings every party must share (default ``PsiConfig()``).
        policy: ID normalisation (shared) and duplicate handling (local); default ``IdPolicy()``.
        backend: where the curve arithmetic runs; defaults to this process.
        state_dir: keep this party's progress here (a folder per peer), so that a rerun after a party died resumes
            from the buckets both sides finished (:mod:`vsplit.psi.resume`); delete it once the result is kept.
        parties: the number of parties this side expects, checked against the label party's; ``None`` follows it.
    """

    def __init__(
        self,
        ids: Sequence[object] | IdSource,
        *,
        label_party: str,
        config: PsiConfig | None = None,
        policy: IdPolicy | None = None,
        backend: Backend | None = None,
        parties: int | None = None,
        state_dir: str | Path | None = None,
    ) -> None:
        config = config if config is not None else PsiConfig()
        policy = policy if policy is not None else IdPolicy()
        super().__init__(source=as_source(ids), policy=policy)
        self.label_party = label_party
        self._config = config
        self._pair = PairExchange(
            peer=label_party,
            role="partner",
            source=self._source,
            policy=policy,
            config=config,
            backend=backend if backend is not None else SerialBackend(),
            parties=parties or 0,
            state=None if state_dir is None else PairState(Path(state_dir) / label_party, role="partner",
                                                           peer=label_party, config=config),
        )
        self._selected: list[np.ndarray] = []
        self._selected_total: int | None = None
        self._selected_count = 0

    def start(self) -> list[Outgoing]:
        """Send the Hello to the label party."""
        return [Outgoing(self.label_party, self._pair.hello)]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Feed one message from the label party."""
        if sender != self.label_party:
            raise ProtocolError(f"PSI message from {sender!r}; only the label party {self.label_party!r} may send")
        if self._done:
            raise ProtocolError(f"PSI message from {sender!r} after the run finished")
        if isinstance(msg, Selected):
            return self._on_selected(msg)
        try:
            out = [Outgoing(sender, m) for m in self._pair.receive(msg)]
        except NothingToAlign as exc:
            return self._fail(AbortCode.NO_OVERLAP, exc, [sender])
        except (DataError, AlignmentError) as exc:
            return self._fail(AbortCode.BAD_DATA, exc, [sender])
        if self._pair.complete and not self._waits_for_selection:
            if self._pair.match_rows.size == 0:
                return out + self._no_overlap([self._pair], [sender])
            pair = self._pair
            pair.release_order()
            self._finish(pair.match_rows[agreed_order(pair.match_values, keys=pair.match_keys)], [pair])
        return out

    @property
    def _waits_for_selection(self) -> bool:
        hello = self._pair.peer_hello
        return self._config.reveal == "label_party" or (hello is not None and hello.parties > 2)

    def _on_selected(self, msg: Selected) -> list[Outgoing]:
        pair = self._pair
        if not pair.complete or not self._waits_for_selection:
            raise violation("Selected arrived before the exchange was complete or where none was due")
        if msg.index != len(self._selected) or (self._selected_total not in (None, msg.total)):
            raise violation(f"Selected chunk {msg.index} out of order or with a changed total")
        self._selected_total = msg.total
        self._selected_count += len(msg.positions)
        if self._selected_count > msg.total or (len(msg.positions) and int(msg.positions.max()) >= pair.sent_total):
            raise violation("Selected positions beyond what this side sent")
        self._selected.append(msg.positions)
        if self._selected_count < msg.total:
            return []
        positions = np.concatenate(self._selected)
        self._selected = []
        if len(np.unique(positions)) != len(positions):
            raise violation("the label party selected a row twice")
        if pair.learns and not np.isin(positions, pair.match_own).all():
            raise violation("the label party selected rows outside the overlap this side computed")
        self._finish(pair.rows_at(positions), [pair])
        return []
