"""What every bank model of the scoring service reads from its node: the party's name and the ID column.

Example:
    >>> from dataclasses import dataclass
    >>> from types import SimpleNamespace
    >>> @dataclass
    ... class Served(FromNode):
    ...     node: object
    >>> node = SimpleNamespace(name="bank", config=SimpleNamespace(data=SimpleNamespace(id_column="customer_id")))
    >>> Served(node).name, Served(node).id_column
    ('bank', 'customer_id')
"""

from __future__ import annotations

from typing import Any


class FromNode:
    """A mixin for a dataclass with a ``node`` field (the party's loaded node)."""

    node: Any

    @property
    def name(self) -> str:
        """The party's name."""
        return str(self.node.name)

    @property
    def id_column(self) -> str:
        """The ID column of its tables."""
        return str(self.node.config.data.id_column)
