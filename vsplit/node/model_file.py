"""A party's ``model.npz``: where it lies, and reading it back only when it is this party's model of the kind asked.

Example:
    >>> from pathlib import Path
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     read_model(Path(folder), run_id="r1", party="bank", role="label", kind="boosting",
    ...                what="boosting model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.CheckpointError: bank: no trained model at .../model.npz; train first (vsplit train --config ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vsplit.errors import CheckpointError
from vsplit.runtime.checkpoint import load_checkpoint


def read_model(folder: Path, *, run_id: str, party: str, role: str, kind: str,
               what: str) -> tuple[Path, dict[str, Any]]:
    """``folder/model.npz`` and its state, checked to be ``party``'s, of ``run_id``, of ``kind`` (the saved "kind")
    and of ``role``; ``what`` names the model in the error (e.g. "scorecard")."""
    path = folder / "model.npz"
    if not path.is_file():
        raise CheckpointError(f"{party}: no trained model at {path}; train first (vsplit train --config ...)")
    state = load_checkpoint(path, run_id=run_id, party=party)
    if state.get("kind") != kind or state.get("role") != role:
        raise CheckpointError(f"{path} is not a {role} party's {what}; predict with the config it was trained with")
    return path, state
