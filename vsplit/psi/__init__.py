"""Private set intersection: align the parties' records without revealing the customers they do not share.

ECDH-PSI on X25519 as sans-IO machines (:class:`LabelParty`, :class:`Partner`) that run over any pump: in one
process with :func:`~vsplit.runtime.psi.align_in_process`, or one party per process or host with
:func:`~vsplit.runtime.psi.run_party` (both in :mod:`vsplit.runtime.psi`, not exported here: the protocol never imports
the runtime). See :mod:`vsplit.psi.curve` for why the construction is sound and :mod:`vsplit.psi.config` for what
each ``reveal`` mode discloses.

Every name is imported on first use, so a worker process that only needs :mod:`vsplit.psi.curve` loads nothing else.

Example:
    >>> from vsplit.runtime.psi import align_in_process
    >>> out = align_in_process({"bank": ["u1", "u2", "u3"], "shop": ["u3", "u1", "u9"]}, label_party="bank")
    >>> out["bank"].ids == out["shop"].ids
    True
"""

from typing import TYPE_CHECKING

from vsplit.lazy import lazy_attributes

#: Public names imported on first use: name -> "module:attribute".
_LAZY = {
    "PSI_VERSION": "vsplit.psi.config:PSI_VERSION",
    "Alignment": "vsplit.psi.alignment:Alignment",
    "Backend": "vsplit.psi.parallel:Backend",
    "CsvIds": "vsplit.data.id_sources:CsvIds",
    "IdPolicy": "vsplit.psi.ids:IdPolicy",
    "IdSource": "vsplit.data.id_sources:IdSource",
    "LabelParty": "vsplit.psi.label:LabelParty",
    "ParquetIds": "vsplit.data.id_sources:ParquetIds",
    "Partner": "vsplit.psi.partner:Partner",
    "ProcessBackend": "vsplit.psi.parallel:ProcessBackend",
    "PsiConfig": "vsplit.psi.config:PsiConfig",
    "PsiStats": "vsplit.psi.alignment:PsiStats",
    "SequenceIds": "vsplit.data.id_sources:SequenceIds",
    "SerialBackend": "vsplit.psi.parallel:SerialBackend",
    "normalise_id": "vsplit.psi.ids:normalise_id",
    "psi_machines": "vsplit.psi.machines:psi_machines",
}
__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)

if TYPE_CHECKING:  # for type checkers and IDEs only
    from vsplit.data.id_sources import CsvIds, IdSource, ParquetIds, SequenceIds
    from vsplit.psi.alignment import Alignment, PsiStats
    from vsplit.psi.config import PSI_VERSION, PsiConfig
    from vsplit.psi.ids import IdPolicy, normalise_id
    from vsplit.psi.label import LabelParty
    from vsplit.psi.machines import psi_machines
    from vsplit.psi.parallel import Backend, ProcessBackend, SerialBackend
    from vsplit.psi.partner import Partner

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
    "normalise_id",
    "psi_machines",
]
