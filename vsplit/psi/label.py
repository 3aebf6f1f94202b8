"""The label party's PSI machine: one exchange per partner, then the rows that every party shares.

The label party (the one holding the training labels) runs a separate two-party exchange with each partner, each
with its own salt and scalar. When all are complete it keeps its rows that every partner matched - the
intersection of the pairwise intersections - in one agreed order: ascending by the double-blinded values shared with
the first partner, a pseudorandom order that reveals nothing about any party's table. It then tells each partner,
where needed, which of the partner's rows to use as positions in the partner's own sent order (never IDs): always
under ``reveal="label_party"``, and under ``reveal="both"`` when there are several partners. With one partner and
``reveal="both"`` the partner computes the same order itself.

Example:
    >>> from vsplit.psi.partner import Partner
    >>> from vsplit.runtime.inprocess import connect, run_machines
    >>> pumps = connect(["bank", "shop"], session=b"s" * 16)
    >>> out = run_machines(pumps, {"bank": LabelParty(["a", "b", "c"], partners=["shop"]),
    ...                            "shop": Partner(["c", "x", "a"], label_party="bank")})
    >>> out["bank"].ids == out["shop"].ids, sorted(out["bank"].ids)
    (True, ['a', 'c'])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vsplit.data.id_sources import IdSource, as_source
from vsplit.errors import AlignmentError, ConfigError, DataError, ProtocolError
from vsplit.protocol.abort import AbortCode
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.psi.config import PsiConfig
from vsplit.psi.exchange import NothingToAlign, PairExchange
from vsplit.psi.ids import IdPolicy
from vsplit.psi.matches import agreed_order
from vsplit.psi.messages import Selected
from vsplit.psi.parallel import Backend, SerialBackend
from vsplit.psi.party import PartyMachine
from vsplit.psi.resume import PairState


class LabelParty(PartyMachine):
    """The label party's machine (sans-IO).

    Args:
        ids: this party's IDs in table order: a sequence, or an :class:`IdSource` such as ``ParquetIds``.
        partners: the partner parties' names; one exchange runs with each.
        config: settings every party must share (default ``PsiConfig()``).
        policy: ID normalisation (shared) and duplicate handling (local); default ``IdPolicy()``.
        backend: where the curve arithmetic runs; defaults to this process.
        state_dir: keep this party's progress here (a folder per peer), so that a rerun after a party died resumes
            from the buckets both sides finished (:mod:`vsplit.psi.resume`); delete it once the result is kept.
    """

    def __init__(
        self,
        ids: Sequence[object] | IdSource,
        *,
        partners: Sequence[str],
        config: PsiConfig | None = None,
        policy: IdPolicy | None = None,
        backend: Backend | None = None,
        state_dir: str | Path | None = None,
    ) -> None:
        partners = list(partners)
        if not partners or len(set(partners)) != len(partners):
            raise ConfigError(f"psi partners: need one or more distinct partner names, got {partners}")
        config = config if config is not None else PsiConfig()
        policy = policy if policy is not None else IdPolicy()
        super().__init__(source=as_source(ids), policy=policy)
        self.partners = partners
        self._config = config
        backend = backend if backend is not None else SerialBackend()
        self._pairs = {
            name: PairExchange(
                peer=name,
                role="label",
                source=self._source,
                policy=policy,
                config=config,
                backend=backend,
                parties=1 + len(partners),
                state=None if state_dir is None else PairState(Path(state_dir) / name, role="label", peer=name,
                                                               config=config),
            )
            for name in partners
        }
        self._tells_rows = config.reveal == "label_party" or len(partners) > 1

    def start(self) -> list[Outgoing]:
        """Send a Hello to every partner."""
        return [Outgoing(name, pair.hello) for name, pair in self._pairs.items()]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Feed one message from partner ``sender`` to that pair's exchange."""
        pair = self._pairs.get(sender)
        if pair is None:
            raise ProtocolError(f"PSI message from {sender!r}, who is not a partner of this run")
        if self._done:
            raise ProtocolError(f"PSI message from {sender!r} after the run finished")
        try:
            out = [Outgoing(sender, m) for m in pair.receive(msg)]
        except NothingToAlign as exc:
            return self._fail(AbortCode.NO_OVERLAP, exc, self.partners)
        except (DataError, AlignmentError) as exc:
            return self._fail(AbortCode.BAD_DATA, exc, self.partners)
        if all(p.complete for p in self._pairs.values()):
            out += self._conclude()
        return out

    def _conclude(self) -> list[Outgoing]:
        pairs = [self._pairs[name] for name in self.partners]
        for pair in pairs:  # the partners' positions come from the matches: this side's sent order is done with
            pair.release_order()
        first = pairs[0]
        common = first.match_rows
        for pair in pairs[1:]:
            common = common[np.isin(common, pair.match_rows)]
        if common.size == 0:
            return self._no_overlap(pairs, self.partners)
        if len(common) == len(first.match_rows):  # one partner: every match is kept
            order = agreed_order(first.match_values, keys=first.match_keys)
            rows = first.match_rows[order]
        else:
            keep = np.flatnonzero(np.isin(first.match_rows, common))
            order = agreed_order(first.match_values[keep], keys=first.match_keys[keep])
            rows = first.match_rows[keep][order]
        del order
        out: list[Outgoing] = []
        if self._tells_rows:
            chunk = self._config.chunk
            for pair in pairs:
                sorter = np.argsort(pair.match_rows, kind="stable")
                positions = pair.match_peer[sorter[np.searchsorted(pair.match_rows, rows, sorter=sorter)]]
                for i, start in enumerate(range(0, len(positions), chunk)):
                    part = np.ascontiguousarray(positions[start : start + chunk], dtype=np.int64)
                    out.append(Outgoing(pair.peer, Selected(index=i, total=len(positions), positions=part)))
        self._finish(rows, pairs)
        return out
