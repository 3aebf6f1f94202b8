"""A partner daemon's part of the reason codes on ``/v1/score``: its side of ``vsplit explain``'s exchange, per request.

Theory of operation. When a request to the bank asks for reason codes (live mode only), the bank opens one
explanation per partner (:class:`~vsplit.serve.messages.ExplainOpen`, the keyed IDs of the applicants the split
scored). The partner picks those customers' prepared rows from its serving table (prepared once per model version and
table, on the first explanation), builds the same :class:`~vsplit.explain.machine.ExplainMachine`
``vsplit explain`` builds (its own [explain] ``share_top_k`` says whether it names its top columns) and answers the
bank's steps (:mod:`vsplit.serve.explain_link`). It sends what ``vsplit explain`` sends: its segment's outputs along
each applicant's integrated-gradients path, then one number per applicant, its group's attribution; its columns'
values, their attributions and its baseline never leave it. The work runs on one worker thread of its own, so the
daemon's link reader goes on answering embedding requests meanwhile; at most :data:`MAX_OPEN` explanations are held
(an older one the bank abandoned is dropped). A refusal carries a code only. Of a scorecard run the exchange is
``vsplit predict``'s scoring round instead (:mod:`vsplit.serve.scorecard_reasons`): the partner answers the
applicants' points and its costliest attributes, from its bins of them.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from vsplit.errors import VsplitError
from vsplit.serve import messages as m
from vsplit.serve.explain_link import FROM_BANK, fit_baseline, unexplainable, unwrap, without_baseline, wrap

log = logging.getLogger(__name__)

#: the most explanations a partner holds open at once
MAX_OPEN = 64


class PartnerExplainer:
    """Answer the bank's explanations for a daemon: ``models()`` gives the loaded versions (run ID -> model),
    ``read(model)`` the serving table for ``model``, ``stamp()`` the table file's state, ``send`` sends to the bank;
    ``session``: the serving link's session id; ``share_top_k``: this party's ``explain.share_top_k``."""

    def __init__(self, *, me: str, bank: str, models: Callable[[], dict[str, Any]], read: Callable[[Any], Any],
                 stamp: Callable[[], Any], send: Callable[[Any], None], session: bytes, share_top_k: int) -> None:
        self.me, self.bank = me, bank
        self._models, self._read, self._stamp, self._send = models, read, stamp, send
        self.session, self.share_top_k = session, share_top_k
        self._prepared: dict[tuple[str, int], tuple[Any, dict[bytes, int], tuple[torch.Tensor, ...]]] = {}
        self._open: collections.OrderedDict[int, list[Any]] = collections.OrderedDict()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vsplit-serve-explain")
        self._lock = threading.Lock()
        self._closed = False

    def handle(self, msg: m.ExplainOpen | m.ExplainStep) -> None:
        """Take one message of the bank's (on the link's reader thread): the work is queued for the worker (after
        :meth:`close`, dropped: the link it came on is going)."""
        with self._lock:
            if not self._closed:
                self._worker.submit(self._safely, msg)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._worker.shutdown(wait=False, cancel_futures=True)

    def _safely(self, msg: Any) -> None:
        try:
            if isinstance(msg, m.ExplainOpen):
                self._start(msg)
            else:
                self._step(msg)
        except _Refused as exc:
            self._refuse(msg.request, exc.code)
        except VsplitError as exc:  # a malformed or unexpected step: the bank gets a code, the log the reason
            log.warning("%s: explanation %d refused: %s", self.me, msg.request, exc)
            self._refuse(msg.request, m.BAD_REQUEST)
        except Exception:  # a bug: logged here; the bank gets a code, this daemon goes on serving
            log.exception("%s: explanation %d failed", self.me, msg.request)
            self._refuse(msg.request, m.INTERNAL)

    def _refuse(self, request: int, code: int) -> None:
        self._open.pop(request, None)
        try:
            self._send(m.ExplainStep(request=request, frame=np.zeros(0, np.uint8), code=code))
        except VsplitError as exc:  # the link dropped: the bank's wait ends with it
            log.warning("%s: could not refuse explanation %d (%s)", self.me, request, exc)

    def _start(self, msg: m.ExplainOpen) -> None:
        from vsplit.explain.session import explain_machine

        model = self._models().get(msg.run_id)
        if model is None:
            raise _Refused(m.VERSION_UNKNOWN)
        kind = getattr(model, "kind", "")
        scorecard = kind == "scorecard"  # reasons: vsplit predict's round (scorecard_reasons)
        node, party, why = getattr(model, "node", None), None, None
        if node is None:
            why = "its model is not a split network"
        elif kind == "ensemble":  # one network of its bag (the trees' part needs no exchange)
            nets = model.networks.node
            if msg.network >= len(nets.networks):
                raise _Refused(m.BAD_REQUEST)
            node, party = nets, nets.networks[msg.network]
            why = without_baseline(nets.name, party)
        elif msg.network:
            raise _Refused(m.BAD_REQUEST)
        elif not scorecard:
            party, why = node.party, unexplainable(node)
        if why is not None:
            log.warning("%s: reason codes of run %s refused: %s", self.me, msg.run_id, why)
            raise _Refused(m.NOT_EXPLAINABLE)
        index, inputs = self._rows(model, party, network=msg.network)
        raw = np.ascontiguousarray(msg.keys).tobytes()
        rows = [index.get(raw[i * m.KEY_BYTES:(i + 1) * m.KEY_BYTES], -1) for i in range(len(msg.keys))]
        if min(rows) < 0:
            raise _Refused(m.UNKNOWN_CUSTOMER)
        picked = tuple(t[torch.as_tensor(rows, dtype=torch.int64)] for t in inputs)
        if scorecard:
            from vsplit.scorecard.messages import PointsAsk

            machine, allowed = model.reasons_machine(picked[0].numpy()), (PointsAsk,)
        else:
            fit_baseline(party, node.topology)
            machine = explain_machine(party, node.topology, picked, n_rows=len(rows), share_top_k=self.share_top_k)
            allowed = FROM_BANK
        # the machine, the next step expected, the next step sent, what the bank may send
        self._open[msg.request] = [machine, 0, 0, allowed]
        while len(self._open) > MAX_OPEN:
            self._open.popitem(last=False)
        self._send_all(msg.request, machine.start())

    def _step(self, msg: m.ExplainStep) -> None:
        held = self._open.get(msg.request)
        if held is None or msg.code:
            self._open.pop(msg.request, None)  # the bank gave up (or sent a code): nothing to answer
            return
        machine = held[0]
        inner = unwrap(msg, session=self.session, seq=held[1], allowed=held[3])
        held[1] += 1
        self._send_all(msg.request, machine.receive(self.bank, inner))
        if machine.done:
            self._open.pop(msg.request, None)

    def _send_all(self, request: int, outgoing: list[Any]) -> None:
        held = self._open[request]
        for out in outgoing:
            self._send(wrap(request, out.message, session=self.session, seq=held[2]))
            held[2] += 1

    def _rows(self, model: Any, party: Any, *, network: int = 0) -> tuple[dict[bytes, int], tuple[torch.Tensor, ...]]:
        """The serving table's rows for ``model`` prepared by ``party`` (network ``network`` of a bag; ``None``: a
        scorecard's bins), and each key's first row; prepared once per table."""
        stamp = self._stamp()
        held = self._prepared.get((model.run_id, network))
        if held is not None and held[0] == stamp:
            return held[1], held[2]
        table = self._read(model)
        if party is None:  # a scorecard: its bins of its attributes, as batch prediction's
            ids, inputs = table[model.node.config.data.id_column].tolist(), (torch.from_numpy(model.codes(table)),)
        else:
            ids, inputs = party.prepare(table)
        from vsplit.serve.model import canonical_ids

        keys = m.id_keys(canonical_ids(list(ids), casefold=model.casefold), run_id=model.run_id)
        raw = keys.tobytes()
        index: dict[bytes, int] = {}
        for i in range(len(keys)):
            index.setdefault(raw[i * m.KEY_BYTES:(i + 1) * m.KEY_BYTES], i)
        self._prepared[(model.run_id, network)] = (stamp, index, tuple(inputs))
        return index, tuple(inputs)


class _Refused(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(m.REFUSALS.get(code, str(code)))
        self.code = code
