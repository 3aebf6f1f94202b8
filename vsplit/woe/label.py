"""The label party's machine: encrypt (1, label) per row, decrypt per-bin counts, class them, send each partner its
classing and WOE.

Theory of operation: the label party makes the run's key pair (2048-bit OU by default; the secret key never leaves
this process), encrypts each aligned row's packed pair (1, label) once and sends the same ciphertexts to every
partner with its public key. Each partner answers with its attributes' shape (fine bins per attribute, their kinds,
their names if it shares them) and the packed sums per fine bin, of each attribute all but the largest bin, which the
label party derives from its totals. It decrypts them into rows and events per fine bin, checks they add up, classes
them coarsely (:mod:`vsplit.woe.classing`) on those counts alone, and sends each partner which of its fine bins merge
and the WOE and IV that follow. Its own attributes it counts in the clear.

What it learns of a partner: per fine bin of each attribute, the rows and events in it (so the partner's distribution
over its bins, FATE#1430; ``min_bin_rows`` at the partner bounds how few rows a bin tells about), never a value, an
edge, or which row is in which bin.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.woe.fine import fit_fine_bins
    >>> x = np.arange(200.0)
    >>> fine = fit_fine_bins(pd.DataFrame({"x": x}), max_bins=2)
    >>> labels = (np.arange(200) % 10 < np.where(x < 100, 2, 6)).astype(int)  # 20% events, then 60%
    >>> machine = LabelWoe(fine, codes=fine[0].codes(x)[:, None], labels=labels, partners=[])
    >>> _ = machine.start()
    >>> machine.done, round(machine.result.iv()["x"], 4)
    (True, 0.7466)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from vsplit.boosting.backend import Backend, SerialBackend
from vsplit.errors import DataError, ProtocolError
from vsplit.he import KeyPair, decode_ciphertexts, decrypt_sums, generate_keypair
from vsplit.protocol.machine import Outgoing
from vsplit.protocol.message import Message
from vsplit.woe.classing import ClassingParams, coarse_classes, merge_counts, woe_iv
from vsplit.woe.fine import FineBins
from vsplit.woe.maps import WoeMap
from vsplit.woe.messages import CIPHER_HEADER_BYTES, VERSION, WoeClassing, WoeHello, WoeLabels, WoeShape, WoeSums
from vsplit.woe.partner import label_packing
from vsplit.woe.result import PartyBinning, ValueReport
from vsplit.woe.tables import BinningTable


class LabelWoe:
    """The label party's side of the binning.

    Args:
        fine: its own attributes' fine bins; ``codes``: int ``(rows, attributes)``, each aligned row's fine bin.
        labels: 0/1 per aligned row.
        partners: the partners' names.
        params: the coarse classing's settings.
        keys: this run's key pair; made here (``scheme``, ``key_bits``) when not given, and only if there are partners.
        name: this party's name, in the tables.
        backend: where the labels are encrypted (:mod:`vsplit.boosting.backend`; default: this process).
    """

    def __init__(self, fine: Sequence[FineBins], *, codes: np.ndarray, labels: np.ndarray, partners: Sequence[str],
                 params: ClassingParams | None = None, keys: KeyPair | None = None, scheme: str = "ou",
                 key_bits: int = 2048, insecure_small_key_for_tests: bool = False, name: str = "bank",
                 backend: Backend | None = None) -> None:
        self.fine, self.name = list(fine), name
        self.codes = np.asarray(codes, dtype=np.int64).reshape(len(labels), len(self.fine))
        self.labels = np.asarray(labels, dtype=np.float64)
        if not len(self.labels) or not np.isin(self.labels, (0.0, 1.0)).all():
            raise DataError("woe: labels must be 0 or 1 on every aligned row")
        if self.labels.min() == self.labels.max():
            raise DataError(f"woe: every aligned row has label {int(self.labels[0])}; WOE needs events and non-events")
        self.partners, self.params = list(partners), params or ClassingParams()
        self.backend: Backend = backend or SerialBackend()
        self.keys = keys if keys is not None or not self.partners else generate_keypair(
            scheme=scheme, key_bits=key_bits, insecure_small_key_for_tests=insecure_small_key_for_tests)
        self.shapes: dict[str, WoeShape] = {}
        self.tables: dict[str, list[BinningTable]] = {}
        self._classing: dict[str, WoeClassing] = {}
        self._waiting: set[str] = set()
        self.done = False
        self.result: ValueReport | None = None

    def expects(self, peer: str) -> bool:
        """Whether an answer from ``peer`` is still awaited."""
        return peer in self._waiting

    def start(self) -> list[Outgoing]:
        """Send the key and the encrypted labels to every partner (with no partner: class its own attributes)."""
        if not self.partners:
            return self._finish()
        assert self.keys is not None
        self.packing = label_packing(len(self.labels), self.keys.public.plaintext_bits)
        key = np.frombuffer(self.keys.public.to_bytes(), dtype=np.uint8)
        hello = WoeHello(version=VERSION, rows=len(self.labels), slot_bits=self.packing.slot_bits, key=key)
        pairs = np.column_stack([np.ones(len(self.labels)), self.labels])
        frame = np.frombuffer(self.backend.encrypt(self.keys.public, pairs, packing=self.packing), dtype=np.uint8)
        self._waiting = set(self.partners)
        labels = WoeLabels(frame=frame)
        return [o for p in self.partners for o in (Outgoing(p, hello), Outgoing(p, labels))]

    def receive(self, sender: str, msg: Message) -> list[Outgoing]:
        """Take a partner's shape, then its sums; when every partner's are in, send the classings."""
        wanted = WoeSums if sender in self.shapes else WoeShape
        if sender not in self._waiting or not isinstance(msg, wanted):
            raise ProtocolError(f"woe: unexpected {type(msg).__name__} from {sender!r}")
        if isinstance(msg, WoeShape):
            self.shapes[sender] = msg
            return []
        self._read(sender, msg)
        self._waiting.discard(sender)
        return [] if self._waiting else self._finish()

    def _read(self, sender: str, msg: WoeSums) -> None:
        """Decrypt a partner's sums, derive the skipped bins, check they add up, class them."""
        assert self.keys is not None
        shape = self.shapes[sender]
        n_bins = shape.bins.astype(np.int64)
        if len(msg.skipped) != len(n_bins) or (msg.skipped >= n_bins).any():
            raise ProtocolError(f"woe: partner {sender!r} skipped bins that do not fit its {len(n_bins)} attributes")
        count = int(n_bins.sum() - len(n_bins))
        per = self.packing.sums_per_plaintext if count > 1 and self.packing.sums_per_plaintext > 1 else 1
        expected = -(-count // per)
        try:
            sums = decode_ciphertexts(msg.frame.tobytes(), public=self.keys.public, expected_count=expected,
                                      max_bytes=CIPHER_HEADER_BYTES + expected * self.keys.public.width)
        except ProtocolError as exc:
            raise ProtocolError(f"woe: partner {sender!r} sent malformed bin sums ({exc})") from None
        ints = decrypt_sums(self.keys, sums, packing=self.packing, count=count, sums_per_plaintext=per)
        rows_total, events_total = len(self.labels), int(self.labels.sum())
        names = shape.names.split("\n") if shape.names else [f"{sender}#{k}" for k in range(len(n_bins))]
        tables, at = [], 0
        for k, n in enumerate(n_bins.tolist()):  # a loop over attributes
            counts = np.zeros((n, 2), dtype=np.int64)
            others = [b for b in range(n) if b != int(msg.skipped[k])]
            counts[others] = ints[at : at + n - 1]
            at += n - 1
            counts[int(msg.skipped[k])] = (rows_total, events_total) - counts.sum(axis=0)
            if (counts < 0).any() or (counts[:, 1] > counts[:, 0]).any():
                raise ProtocolError(f"woe: partner {sender!r}'s bin sums of attribute {names[k]!r} do not add up "
                                    "to the rows and events of the aligned rows")
            tables.append(self._classed(sender, names[k], "category" if shape.kinds[k] else "numeric",
                                        events=counts[:, 1], nonevents=counts[:, 0] - counts[:, 1]))
        self.tables[sender] = tables

    def _classed(self, party: str, name: str, kind: str, *, events: np.ndarray, nonevents: np.ndarray,
                 labels: list[str] | None = None) -> BinningTable:
        coarse = coarse_classes(events, nonevents, kind=kind, params=self.params)
        e, n = merge_counts(events, nonevents, coarse)
        if labels is None:  # a partner's: fine-bin indices only
            labels = [_fine_range(np.nonzero(coarse == c)[0].tolist()) for c in range(len(e) - 1)] + ["missing"]
        return BinningTable(party=party, attribute=name, kind=kind, bins=tuple(labels), events=e, nonevents=n,
                            coarse_of_fine=coarse)

    def _own(self) -> tuple[list[BinningTable], PartyBinning]:
        tables, maps = [], []
        y = self.labels.astype(np.int64)
        for k, fine in enumerate(self.fine):  # a loop over attributes
            events = np.bincount(self.codes[:, k], weights=y, minlength=fine.n_bins).astype(np.int64)
            rows = np.bincount(self.codes[:, k], minlength=fine.n_bins)
            table = self._classed(self.name, fine.name, fine.kind, events=events, nonevents=rows - events, labels=[])
            assert table.coarse_of_fine is not None
            woe_map = WoeMap(fine=fine, coarse_of_fine=table.coarse_of_fine, woe=table.woe)
            tables.append(dataclasses.replace(table, bins=tuple(woe_map.coarse_labels())))
            maps.append(woe_map)
        return tables, PartyBinning(maps=maps, iv={t.attribute: t.iv for t in tables})

    def _finish(self) -> list[Outgoing]:
        own_tables, own = self._own()
        out = []
        for p in self.partners:
            tables = self.tables[p]
            woe = [woe_iv(t.events, t.nonevents)[0] for t in tables]
            out.append(Outgoing(p, WoeClassing(
                coarse=np.concatenate([np.asarray(t.coarse_of_fine) for t in tables]).astype(np.int32),
                n_coarse=np.array([len(w) for w in woe], dtype=np.uint16), woe=np.concatenate(woe),
                iv=np.array([t.iv for t in tables], dtype=np.float64))))
        everyone = own_tables + [t for p in self.partners for t in self.tables[p]]
        self.result = ValueReport(label_party=self.name, tables=everyone, rows=len(self.labels),
                                  events=int(self.labels.sum()), own=own)
        self.done, self._waiting = True, set()
        return out


def _fine_range(members: list[int]) -> str:
    if not members:
        return "(empty)"
    return f"fine {members[0]}" if len(members) == 1 else f"fine {members[0]}-{members[-1]}" \
        if members == list(range(members[0], members[-1] + 1)) else "fine " + ",".join(map(str, members))
