"""Sums by groups of rows, on ciphertexts, at the partner: histograms, their subtraction, and their packing.

The partner alone knows the groups (a row's bin in each of its columns, the rows of a tree node), so it adds the
label party's ciphertexts by group and sends one ciphertext per group back: sf-heu's ``batch_select_sum`` does the
additions in C++ (no Python loop per row: rows are sorted by group with numpy). A node's sibling costs nothing more:
``sibling = parent - node`` (:func:`subtract`). Before sending, :func:`pack_sums` shifts and adds
``sums_per_plaintext`` group sums into one ciphertext (the i-th times ``2**(i * slots * slot_bits)``), which cuts the
label party's decryptions and the bytes sent by that factor.

What the label party learns from the sums: per group, the sums of its own values (e.g. events and non-events per
bin, gradient sums per node), hence each group's size; never a partner's value or bin edge. Small groups reveal
more, so ``min_group_size`` refuses any non-empty group smaller than that.

Example:
    >>> import pytest; _ = pytest.importorskip("heu")  # skipped where sf-heu is not installed
    >>> import numpy as np
    >>> from vsplit.he import Packing, decrypt_sums, encrypt_rows, generate_keypair, group_sums
    >>> keys = generate_keypair(key_bits=1024, insecure_small_key_for_tests=True)
    >>> packing = Packing.plan(scale=1, bounds=(1.0,), max_rows=4, plaintext_bits=keys.public.plaintext_bits)
    >>> labels = encrypt_rows(keys.public, np.array([1.0, 0.0, 1.0, 1.0]), packing=packing)
    >>> per_bin = group_sums(labels, np.array([0, 1, 1, 0]), n_groups=2)
    >>> decrypt_sums(keys, per_bin, packing=packing, count=2).ravel().tolist()
    [2, 1]
"""

from __future__ import annotations

import numpy as np

from vsplit.errors import DataError, ProtocolError
from vsplit.he._lib import heu_modules
from vsplit.he.crypt import Ciphertexts
from vsplit.he.fixed import Packing


def group_sums(column: Ciphertexts, codes: np.ndarray, *, n_groups: int, min_group_size: int = 1) -> Ciphertexts:
    """One ciphertext per group: the sum of the rows whose code is that group (``-1``: the row is in no group).

    Args:
        column: the label party's ciphertexts, one a row.
        codes: int array, one code a row, in ``-1..n_groups-1`` (a column's bin codes; a node's rows, others -1).
        n_groups: the number of groups (an empty group sums to an encryption of 0).
        min_group_size: refuse any non-empty group with fewer rows.

    Raises:
        DataError: codes of the wrong length or out of range, or a group smaller than ``min_group_size``.
    """
    codes = np.asarray(codes)
    if codes.shape != (len(column),) or not np.issubdtype(codes.dtype, np.integer):
        raise DataError(f"he group sums: codes of shape {codes.shape} and dtype {codes.dtype}; expected "
                        f"({len(column)},) integers")
    if n_groups < 1 or (codes.size and (codes.min() < -1 or codes.max() >= n_groups)):
        raise DataError(f"he group sums: codes must lie in -1..{n_groups - 1}")
    sizes = np.bincount(codes[codes >= 0], minlength=n_groups)
    small = np.nonzero((sizes > 0) & (sizes < min_group_size))[0]
    if small.size:
        raise DataError(f"he group sums: group {int(small[0])} has {int(sizes[small[0]])} rows, fewer than "
                        f"min_group_size = {min_group_size}; merge it with a neighbour")
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(-1, n_groups + 1))
    groups = [order[bounds[g + 1] : bounds[g + 2]].tolist() for g in range(n_groups)]  # a loop over groups
    evaluator = column.public.kit.evaluator()
    return Ciphertexts(public=column.public, array=evaluator.batch_select_sum(column.array, groups))


def subtract(parent: Ciphertexts, node: Ciphertexts) -> Ciphertexts:
    """Histogram subtraction: the sibling's group sums, ``parent - node``, without touching a row.

    Raises:
        ProtocolError: the two are under different keys or of different lengths (a bug here).
    """
    if parent.public is not node.public and parent.public.fingerprint != node.public.fingerprint:
        raise ProtocolError("he subtract: the histograms are under different keys", local=True)
    if len(parent) != len(node):
        raise ProtocolError(f"he subtract: {len(parent)} parent sums, {len(node)} node sums", local=True)
    return Ciphertexts(public=parent.public, array=parent.public.kit.evaluator().sub(parent.array, node.array))


def pack_sums(sums: Ciphertexts, *, packing: Packing) -> Ciphertexts:
    """Pack ``packing.sums_per_plaintext`` group sums into each ciphertext (shift and add, homomorphically).

    Horner's rule, vectorized over the packed ciphertexts: ``acc = acc * 2**width + next``, so each step costs one
    ``width``-bit exponentiation a packed ciphertext. The label party reads them with
    ``decrypt_sums(..., sums_per_plaintext=packing.sums_per_plaintext)``.
    """
    per = packing.sums_per_plaintext
    if per <= 1 or len(sums) <= 1:
        return sums
    phe, _ = heu_modules()
    kit, evaluator = sums.public.kit, sums.public.kit.evaluator()
    count = len(sums)
    packed = -(-count // per)
    padded = sums.array[list(range(count)) + [0] * (packed * per - count)]  # a copy
    if packed * per > count:  # zeros (c - c) pad the last packed ciphertext
        padding = list(range(count, packed * per))
        padded[padding] = evaluator.sub(padded[padding], padded[padding])
    shift = kit.array(np.full(packed, 1 << (packing.slots * packing.slot_bits), dtype=object),
                      phe.BigintEncoderParams())
    starts = np.arange(packed) * per
    acc = padded[(starts + per - 1).tolist()]
    for digit in range(per - 2, -1, -1):  # a loop over the sums a plaintext holds, not over rows
        acc = evaluator.add(evaluator.mul(acc, shift), padded[(starts + digit).tolist()])
    return Ciphertexts(public=sums.public, array=acc)
