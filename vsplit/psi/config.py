"""Settings of one PSI run that both parties must share, checked once when built.

``reveal`` decides who learns what (every party always learns the other's set size):

* ``"both"`` (default): with two parties, each learns which of its own rows are shared and computes the agreed
  order itself. With more, each partner learns its pairwise overlap with the label party, then is told which rows
  all parties share.
* ``"label_party"``: only the label party learns the pairwise overlaps. A partner learns nothing from the exchange
  itself and is then told which of its rows to use (positions in the order it sent, never IDs), so it learns the
  rows that all parties share and nothing about pairwise overlaps.

Example:
    >>> PsiConfig(reveal="label_party").reveal
    'label_party'
    >>> PsiConfig(chunk=0)
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: psi.chunk: 0 is not in 1..131072; 65536 is a good value
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from vsplit.errors import ConfigError
from vsplit.psi.buckets import check_buckets

#: Version of the PSI protocol; both parties must run the same one (2: bucketed, with bucket tags; 3: Redo; 4: resume
#: from finished buckets).
PSI_VERSION = 4
#: Default protocol label hashed into every u-coordinate (domain separation).
DEFAULT_LABEL = b"vsplit-psi-v1"
#: Largest number of points (or positions) one message may carry: 4 MiB of points.
MAX_CHUNK = 1 << 17
REVEAL_MODES = ("both", "label_party")


@dataclass(frozen=True)
class PsiConfig:
    """Settings of a PSI run.

    Args:
        reveal: who learns the intersection, see the module docstring.
        context: text both parties agree on out of band (e.g. the run id or project name); it is bound into the
            session salt, so parties configured for different runs are refused in the handshake.
        label: the protocol label for domain separation; change it only to run a separate protocol instance.
        chunk: points per message (2^16 points are 2 MiB).
        window: how many of its own chunks a party may have in flight before the peer answers; bounds memory.
        buckets: how many buckets each party splits its IDs into (see :mod:`vsplit.psi.buckets`); each bucket is
            padded to a public size and blinded with its own scalar. 1 (default) is the unbucketed protocol.
        memory_budget_mb: this party's own setting (not compared with the peer's): above 0, its hashed IDs are
            spilled to files by bucket (:mod:`vsplit.psi.store`) unless they fit in a quarter of this many MiB, and
            its matches are logged to files bucket by bucket (:mod:`vsplit.psi.matches`); 0 keeps both in memory.
    """

    reveal: Literal["both", "label_party"] = "both"
    context: str = ""
    label: bytes = DEFAULT_LABEL
    chunk: int = 1 << 16
    window: int = 4
    buckets: int = 1
    memory_budget_mb: int = 0

    def __post_init__(self) -> None:
        if self.reveal not in REVEAL_MODES:
            raise ConfigError(f"psi.reveal: {self.reveal!r} is not one of {', '.join(REVEAL_MODES)}")
        if not isinstance(self.label, bytes) or not 0 < len(self.label) < 256:
            raise ConfigError("psi.label: must be 1..255 bytes, e.g. b'vsplit-psi-v1'")
        if not 1 <= self.chunk <= MAX_CHUNK:
            raise ConfigError(f"psi.chunk: {self.chunk} is not in 1..{MAX_CHUNK}; 65536 is a good value")
        if not 1 <= self.window <= 64:
            raise ConfigError(f"psi.window: {self.window} is not in 1..64; 4 is a good value")
        check_buckets(self.buckets)
        if not isinstance(self.memory_budget_mb, int) or self.memory_budget_mb < 0:
            raise ConfigError(f"psi.memory_budget_mb: {self.memory_budget_mb!r} must be 0 (no limit) or more MiB")
