"""Where the ciphertext work of boosting runs: in this process, or spread over worker processes.

The boosting machines are sans-IO but not compute-free: the label party encrypts a tree's gradients, a partner sums
ciphertexts by (node, column, code) and packs the sums. Each hands that work to a backend object and gets a wire
frame back (:func:`vsplit.he.encode_ciphertexts`' format). :class:`SerialBackend` computes in the calling process;
:class:`ProcessBackend` splits the rows to encrypt, or the sums to make, over worker processes, because sf-heu holds
the GIL while it computes, so threads would not help (measured: a busy Python thread gets under 4 % of its idle
progress during an encryption). Two parties on one 2-core machine take turns (the bank encrypts while the partner
waits, and the other way round), so each can use both cores in its turn. Workers receive the public key, the
gradients' frame and plain integer lists, and return ciphertext bytes; the secret key never leaves the label party's
process, and a worker never reads a peer's bytes that the partner's process has not checked first.

Example:
    >>> import pytest; _ = pytest.importorskip("heu")  # skipped where sf-heu is not installed
    >>> import warnings, numpy as np
    >>> from vsplit.he import Packing, decode_ciphertexts, decrypt_sums, generate_keypair
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     keys = generate_keypair(key_bits=1024, insecure_small_key_for_tests=True)
    >>> packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=3, plaintext_bits=keys.public.plaintext_bits)
    >>> frame = SerialBackend().encrypt(keys.public, np.array([1.0, 0.0, 1.0]), packing=packing)
    >>> column = decode_ciphertexts(frame, public=keys.public, expected_count=3)
    >>> decrypt_sums(keys, column, packing=packing, count=3).ravel().tolist()
    [1, 0, 1]
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import numpy as np

from vsplit.boosting.messages import CIPHER_HEADER_BYTES
from vsplit.errors import ConfigError
from vsplit.he import Ciphertexts, Packing, PublicKey, decode_ciphertexts, encode_ciphertexts, encrypt_rows, pack_sums


class Backend(Protocol):
    """Encrypts a tree's gradients (label party); sums and packs a level's histograms (partner)."""

    def encrypt(self, public: PublicKey, values: np.ndarray, *, packing: Packing) -> bytes:
        """The ciphertext message of ``values`` (one packed plaintext a row)."""

    def sums(self, column: Ciphertexts, frame: bytes, groups: list[list[int]], *, packing: Packing) -> bytes:
        """The ciphertext message of the packed sums of ``column`` (read from ``frame``) over each group of rows."""


#: the most rows one sf-heu call encrypts, and the most rows one call sums: sf-heu holds the GIL while it computes,
#: so between two calls the channel's heartbeat thread gets its turn (a call of seconds on a loaded machine must stay
#: well under the peer's 30 s idle timeout)
ENCRYPT_CHUNK = 1 << 15
SUM_CHUNK = 1 << 18


class SerialBackend:
    """Computes in the calling process, in calls of at most :data:`ENCRYPT_CHUNK` rows encrypted or
    :data:`SUM_CHUNK` rows summed (the frames are the same as one call's)."""

    def encrypt(self, public: PublicKey, values: np.ndarray, *, packing: Packing) -> bytes:
        frames = [encode_ciphertexts(encrypt_rows(public, values[i : i + ENCRYPT_CHUNK], packing=packing))
                  for i in range(0, len(values), ENCRYPT_CHUNK)]  # a loop over chunks of rows
        return frames[0] if len(frames) == 1 else _join(public, frames)

    def sums(self, column: Ciphertexts, frame: bytes, groups: list[list[int]], *, packing: Packing) -> bytes:
        per = max(packing.sums_per_plaintext, 1)
        if not groups:
            return self._sums(column, groups, packing=packing)
        frames, start, rows = [], 0, 0
        for end in range(per, len(groups) + per, per):  # whole packed ciphertexts, up to SUM_CHUNK rows a call
            rows += sum(map(len, groups[end - per : end]))
            if rows >= SUM_CHUNK or end >= len(groups):
                frames.append(self._sums(column, groups[start:end], packing=packing))
                start, rows = end, 0
        return frames[0] if len(frames) == 1 else _join(column.public, frames)

    @staticmethod
    def _sums(column: Ciphertexts, groups: list[list[int]], *, packing: Packing) -> bytes:
        array = column.public.kit.evaluator().batch_select_sum(column.array, groups)
        return encode_ciphertexts(pack_sums(Ciphertexts(public=column.public, array=array), packing=packing))

    def close(self) -> None:
        """Nothing to stop."""


class ProcessBackend:
    """Spreads each encryption and each level's sums over ``workers`` processes (default: every core).

    Args:
        workers: number of worker processes.
        min_split: less work than this (rows to encrypt, additions to make) is done in the calling process.
        start_method: ``"spawn"`` is safe alongside threads (channel readers), but re-imports the main module in each
            worker: guard a script's entry point with ``if __name__ == "__main__":``.

    Build it once per run and close it: starting the workers and reading the key there takes a second or two.
    """

    def __init__(self, *, workers: int | None = None, min_split: int = 2048, start_method: str = "spawn") -> None:
        self.workers = workers or os.cpu_count() or 1
        if self.workers < 1:
            raise ConfigError(f"boosting workers: {self.workers} must be at least 1")
        self.min_split = min_split
        self.spread = 0  # calls split over the workers (the rest ran here)
        self._serial = SerialBackend()
        import multiprocessing  # here, so importing the machines stays light
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context(start_method)
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        list(self._pool.map(_warm, range(self.workers)))

    def encrypt(self, public: PublicKey, values: np.ndarray, *, packing: Packing) -> bytes:
        if len(values) < self.min_split or self.workers == 1:
            return self._serial.encrypt(public, values, packing=packing)
        key = (public.to_bytes(), public.scheme, public.key_bits)
        self.spread += 1
        step = -(-len(values) // self.workers)
        parts = [self._pool.submit(_encrypt, key, values[i : i + step], packing)
                 for i in range(0, len(values), step)]
        return _join(public, [p.result() for p in parts])

    def sums(self, column: Ciphertexts, frame: bytes, groups: list[list[int]], *, packing: Packing) -> bytes:
        per = max(packing.sums_per_plaintext, 1)
        if sum(map(len, groups)) < self.min_split or self.workers == 1 or len(groups) <= per:
            return self._serial.sums(column, frame, groups, packing=packing)
        public = column.public
        key = (public.to_bytes(), public.scheme, public.key_bits)
        self.spread += 1
        step = -(-len(groups) // (self.workers * per)) * per  # whole packed ciphertexts per worker
        parts = [self._pool.submit(_sums, key, frame, len(column), groups[i : i + step], packing)
                 for i in range(0, len(groups), step)]
        return _join(column.public, [p.result() for p in parts])

    def close(self) -> None:
        """Stop the workers."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _join(public: PublicKey, frames: list[bytes]) -> bytes:
    """One ciphertext message of the ciphertexts of several (in order)."""
    count = sum((len(f) - CIPHER_HEADER_BYTES) // public.width for f in frames)
    head = bytearray(frames[0][:CIPHER_HEADER_BYTES])
    head[13:17] = count.to_bytes(4, "big")  # b"VHC1", 8-byte fingerprint, scheme (u8), then the count (u32)
    return bytes(head) + b"".join(f[CIPHER_HEADER_BYTES:] for f in frames)


_KEYS: dict[bytes, PublicKey] = {}  # a worker's keys, read once each
_COLUMN: dict[str, Any] = {}  # a worker's last gradients, decoded once per tree


def _key(key: tuple[bytes, str, int]) -> PublicKey:
    """The key the calling process already read and accepted (its bytes, scheme and size), read once a worker."""
    data, scheme, bits = key
    if data not in _KEYS:
        _KEYS.clear()
        _KEYS[data] = PublicKey.from_bytes(data, schemes=(scheme,), min_key_bits=bits,
                                           insecure_small_key_for_tests=bits < 2048)
    return _KEYS[data]


def _encrypt(key: tuple[bytes, str, int], values: np.ndarray, packing: Packing) -> bytes:
    import warnings

    with warnings.catch_warnings():  # a test key warned once already, where it was made
        warnings.simplefilter("ignore", UserWarning)
        public = _key(key)
    return encode_ciphertexts(encrypt_rows(public, values, packing=packing))


def _sums(key: tuple[bytes, str, int], frame: bytes, count: int, groups: list[list[int]], packing: Packing) -> bytes:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        public = _key(key)
    if _COLUMN.get("frame") != frame:
        _COLUMN.update(frame=frame, column=decode_ciphertexts(frame, public=public, expected_count=count))
    return SerialBackend().sums(_COLUMN["column"], frame, groups, packing=packing)


def _warm(_: int) -> int:
    return os.getpid()
