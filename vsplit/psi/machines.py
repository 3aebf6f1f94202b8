"""One PSI machine per party: the label party's and each partner's, sharing one config and backend.

Example:
    >>> machines = psi_machines({"bank": ["a", "b"], "shop": ["b", "c"]}, label_party="bank")
    >>> {name: type(m).__name__ for name, m in machines.items()}
    {'bank': 'LabelParty', 'shop': 'Partner'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vsplit.data.id_sources import IdSource
from vsplit.errors import ConfigError
from vsplit.psi.config import PsiConfig
from vsplit.psi.ids import IdPolicy
from vsplit.psi.label import LabelParty
from vsplit.psi.parallel import Backend
from vsplit.psi.partner import Partner
from vsplit.psi.party import PartyMachine


def psi_machines(
    tables: Mapping[str, Sequence[object] | IdSource],
    *,
    label_party: str,
    config: PsiConfig | None = None,
    policies: Mapping[str, IdPolicy] | None = None,
    backend: Backend | None = None,
) -> dict[str, PartyMachine]:
    """One PSI machine per party: a :class:`LabelParty` for ``label_party``, a :class:`Partner` for every other."""
    if label_party not in tables:
        raise ConfigError(f"psi label_party: {label_party!r} is not one of the parties {sorted(tables)}")
    if len(tables) < 2:
        raise ConfigError("psi: at least two parties are needed")
    policies = policies or {}
    config = config if config is not None else PsiConfig()
    partners = [name for name in tables if name != label_party]
    machines: dict[str, PartyMachine] = {
        label_party: LabelParty(
            tables[label_party],
            partners=partners,
            config=config,
            policy=policies.get(label_party, IdPolicy()),
            backend=backend,
        )
    }
    for name in partners:
        machines[name] = Partner(
            tables[name],
            label_party=label_party,
            config=config,
            policy=policies.get(name, IdPolicy()),
            backend=backend,
            parties=len(tables),
        )
    return machines
