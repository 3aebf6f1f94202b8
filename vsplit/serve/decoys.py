"""Live mode's cover: each asked ID hidden among ``k - 1`` decoys a partner already knows, the same ones every time.

Theory of operation. In live mode a partner sees the keyed IDs the bank asks for. With ``serve.k_anonymity = k`` the
bank adds, per applicant, ``k - 1`` decoys and shuffles the request. The decoys are drawn only from the run's
training intersection (``aligned-ids.npy``, :mod:`vsplit.node.record`): customers every partner already knows the
bank has, since PSI showed it them in training. So a decoy never tells a partner about a bank customer it does not
have. The decoys of an applicant are fixed: chosen by HMAC-SHA256 under a secret only the bank holds
(``serve-decoys.key`` in the run folder, 32 random bytes made on first use, 0600), so the same applicant always
comes with the same ``k - 1`` decoys (intersecting two requests with it leaves all ``k``), and a partner cannot
recompute the choice from candidate IDs.

What a partner still learns: an applicant in the training intersection is one of ``k`` customers it knows, all
equally likely; an applicant outside it is the only key of its set that is not in the intersection, so the partner
names it the first time (if it is its customer; if not, it sees an unknown key, which it can test against IDs it
guesses, as any keyed ID). Hiding that needs private information retrieval, which live mode does not do.

Example:
    >>> import numpy as np
    >>> from vsplit.serve.messages import id_keys
    >>> pool = id_keys([str(i) for i in range(100)], run_id="r")
    >>> cover = DecoyCover(key=b"k" * 32, pool=pool, k=3)
    >>> asked, where = cover.pad(id_keys(["7", "new"], run_id="r"), rng=np.random.default_rng(0))
    >>> asked.shape, bool((asked[where] == id_keys(["7", "new"], run_id="r")).all())
    ((6, 16), True)
    >>> twice, where = cover.pad(id_keys(["7", "7"], run_id="r"), rng=np.random.default_rng(2))
    >>> len(twice), bool(where[0] == where[1])
    (3, True)
    >>> again, _ = cover.pad(id_keys(["7"], run_id="r"), rng=np.random.default_rng(1))
    >>> {k.tobytes() for k in again} <= {k.tobytes() for k in asked}
    True
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

import numpy as np

from vsplit.atomic import create_once, refuse_shared
from vsplit.errors import ConfigError
from vsplit.serve.messages import KEY_BYTES

KEY_FILE = "serve-decoys.key"
KEY_SIZE = 32


def decoy_secret(folder: Path) -> bytes:
    """The bank's decoy secret of the run in ``folder``: made on first use (0600, never overwritten), then read."""
    path = Path(folder) / KEY_FILE
    if not path.exists():
        create_once(path, secrets.token_bytes(KEY_SIZE))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            mode = os.fstat(fd).st_mode
            key = os.read(fd, KEY_SIZE + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the decoy secret ({exc.strerror}); delete it to make a new one") \
            from None
    refuse_shared(path, mode, what="the decoy secret")
    if len(key) != KEY_SIZE:
        raise ConfigError(f"{path}: not a decoy secret ({len(key)} bytes, {KEY_SIZE} expected); delete it to make a "
                          "new one")
    return key


class DecoyCover:
    """``k - 1`` decoys per applicant from ``pool`` (keyed IDs the partners know), chosen by HMAC-SHA256 under
    ``key``: a fixed set per applicant (see the module docstring)."""

    def __init__(self, *, key: bytes, pool: np.ndarray, k: int) -> None:
        if len(pool) < k:
            raise ConfigError(f"serve.k_anonymity: {k} needs at least {k} customers in the run's training "
                              f"intersection, it has {len(pool)}; lower serve.k_anonymity")
        self.key, self.k = key, k
        self.pool = np.ascontiguousarray(pool, dtype=np.uint8)
        raw = self.pool.tobytes()
        self._in_pool = {raw[i * KEY_BYTES:(i + 1) * KEY_BYTES]: i for i in range(len(self.pool))}

    def decoys(self, key: bytes) -> np.ndarray:
        """The ``k - 1`` pool rows hiding the applicant of keyed ID ``key``: always the same, never itself."""
        own = self._in_pool.get(key, -1)
        chosen: list[int] = []
        counter = 0
        while len(chosen) < self.k - 1:
            block = hmac.new(self.key, key + counter.to_bytes(4, "big"), hashlib.sha256).digest()
            counter += 1
            for j in range(0, 32, 8):
                row = int.from_bytes(block[j:j + 8], "big") % len(self.pool)
                if row != own and row not in chosen and len(chosen) < self.k - 1:
                    chosen.append(row)
        return np.asarray(chosen, dtype=np.int64)

    def pad(self, keys: np.ndarray, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``keys`` with each one's decoys, each key once (a key asked twice in one request would stand out),
        shuffled; and where each of ``keys`` went."""
        raw = np.ascontiguousarray(keys, dtype=np.uint8).tobytes()
        rows = np.concatenate([self.decoys(raw[i * KEY_BYTES:(i + 1) * KEY_BYTES]) for i in range(len(keys))]) \
            if len(keys) else np.zeros(0, np.int64)
        every = np.ascontiguousarray(np.concatenate([keys, self.pool[rows]]), dtype=np.uint8)
        _, first, inverse = np.unique(every.view(f"V{KEY_BYTES}").ravel(), return_index=True, return_inverse=True)
        order = rng.permutation(len(first))
        at = np.empty(len(first), dtype=np.int64)
        at[order] = np.arange(len(first))
        return np.ascontiguousarray(every[first[order]]), at[inverse.ravel()[: len(keys)]]
