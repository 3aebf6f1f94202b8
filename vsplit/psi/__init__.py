"""Private set intersection: align the parties' records without revealing the customers they do not share.

ECDH-PSI on X25519 as sans-IO machines (:class:`LabelParty`, :class:`Partner`) that run over any pump: in one
process with :func:`align_in_process`, or one party per process or host with :func:`run_party`. See
:mod:`vsplit.psi.curve` for why the construction is sound and :mod:`vsplit.psi.config` for what each ``reveal``
mode discloses.

Example:
    >>> out = align_in_process({"bank": ["u1", "u2", "u3"], "shop": ["u3", "u1", "u9"]}, label_party="bank")
    >>> out["bank"].ids == out["shop"].ids
    True
"""

from vsplit.psi.alignment import Alignment, PsiStats
from vsplit.psi.config import PSI_VERSION, PsiConfig
from vsplit.psi.ids import IdPolicy, normalise_id
from vsplit.psi.label import LabelParty
from vsplit.psi.parallel import Backend, ProcessBackend, SerialBackend
from vsplit.psi.partner import Partner
from vsplit.psi.runner import align_in_process, psi_machines, run_party
from vsplit.psi.sources import CsvIds, IdSource, ParquetIds, SequenceIds

__all__ = [
    "PSI_VERSION",
    "Alignment",
    "Backend",
    "CsvIds",
    "IdPolicy",
    "IdSource",
    "LabelParty",
    "ParquetIds",
    "Partner",
    "ProcessBackend",
    "PsiConfig",
    "PsiStats",
    "SequenceIds",
    "SerialBackend",
    "align_in_process",
    "normalise_id",
    "psi_machines",
    "run_party",
]
