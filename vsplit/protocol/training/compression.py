"""Codecs for the tensors that cross a cut: a registry by name, and a compressor with optional error feedback.

Theory of operation. Each party chooses, in its own config (``[network] compression``), how the tensors *it* sends
are encoded; a receiver accepts every registered codec, because each message says how it was packed. A codec maps
a float32 tensor to the arrays of a message and back (:meth:`Codec.pack`, :meth:`Codec.unpack`). For an entry
``x`` decoded as ``x'``, the codecs promise:

- ``none``: plain float32 :class:`Activations` / :class:`Gradients`, exact (today's messages, bit for bit).
- ``float16``: :class:`PackedActivations` / :class:`PackedGradients` of IEEE half floats, round to nearest:
  ``|x' - x| <= 2^-11 |x|`` in float16's normal range (``|x| >= 2^-14``), ``<= 2^-25`` below it. A value beyond
  float16's largest (65504, or anything that would round to infinity) is *refused* with a local error rather than
  clipped, so the bound always holds; use ``bfloat16`` or ``int8`` for such tensors.
- ``bfloat16``: the upper 16 bits of each float32, round to nearest even, carried as ``uint16``:
  ``|x' - x| <= 2^-8 |x|`` (``<= 2^-134`` for float32 subnormals); float32's whole range.
- ``int8``: per row of the tensor flattened to ``(rows, -1)``, ``scale = absmax / 127`` (rounded up to float32) and
  ``q = round(x / scale)`` in ``[-127, 127]``: ``|x' - x| <= scale / 2 = absmax / 254``, plus the float32
  rounding of ``q * scale`` (below ``2^-17 scale``). A row of zeros has scale 0 and decodes exactly.
- ``topk_<fraction>`` (e.g. ``topk_0.1``), for **gradients only**: per row, the ``k = ceil(fraction * width)``
  entries of largest magnitude are kept exactly (float32; ``topk_<fraction>_float16`` keeps them as float16, with
  float16's bound), the others become 0: every dropped entry is no larger in magnitude than every kept one. A party
  configured with top-k sends its activations with ``none`` (:class:`SparseGradients` exist only for gradients).

Error feedback (``error_feedback=True``, any lossy codec): the sender adds to each tensor what the codec lost on
the previous tensor of the same stream (kind, cut, slot) and keeps what it loses now, so that over many steps the
sum of what crossed equals the sum of what was meant to cross less the last residual, instead of the errors adding
up (for int8 and the float codecs the residual is one step's error; for top-k, the entries not sent yet). It acts
in training only: evaluation and scoring tensors are packed without memory, so a customer's score does not depend
on which customers were scored before. Rows of consecutive batches are different customers, so the residual
carries no per-customer meaning, only the error mass of the stream: a batch with fewer rows than the residual (the
last, smaller batch of an epoch) takes the residual's first rows and the others are dropped. Residuals are not
checkpointed: a resumed run starts them afresh.

The receiving machine checks a declared shape before decoding (:func:`shape_of`, then :func:`values_of`): a
gradient's whole shape against its step's batch and cut (a sparse gradient decodes to its declared shape, whatever
its frame's size), activations' shape after the rows against the cut (a dense codec decodes to at most 4 times its
frame's bytes).

Example:
    >>> import numpy as np
    >>> x = np.array([[0.5, -1.0, 0.25, 3.0]], np.float32)
    >>> msg = Compressor("int8").pack_gradients(0, 0, 0, 0, x)
    >>> type(msg).__name__, msg.data.dtype.name, float(np.abs(values_of(msg) - x).max()) <= 3.0 / 254
    ('PackedGradients', 'int8', True)
    >>> values_of(Compressor("topk_0.5").pack_gradients(0, 0, 0, 0, x)).tolist()
    [[0.0, -1.0, 0.0, 3.0]]
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from vsplit.errors import ConfigError, ProtocolError
from vsplit.protocol.message import Message, all_finite
from vsplit.protocol.training.messages import (
    CODEC_BFLOAT16,
    CODEC_FLOAT16,
    CODEC_INT8,
    FLOAT16,
    FLOAT32,
    MAX_INT8_SCALE,
    TRAIN,
    UINT32,
    Activations,
    Gradients,
    PackedActivations,
    PackedGradients,
    SparseGradients,
)

_NO_SCALES = np.zeros(0, np.float32)
_NO_INDICES = np.zeros((0, 0), np.uint32)
#: What a codec's kind of message is: plain float32, a dense packed tensor, or the sparse top-k of a gradient.
PLAIN, DENSE, SPARSE = "plain", "dense", "sparse"


class Packed(NamedTuple):
    """A tensor in a codec's wire form: ``data`` (the tensor in the codec's dtype; top-k: the kept values,
    ``(rows, k)``), ``scales`` (int8: one per row), ``indices`` (top-k: ``(rows, k)``) and the logical ``shape``."""

    data: np.ndarray
    scales: np.ndarray
    indices: np.ndarray
    shape: tuple[int, ...]


class Codec:
    """A way to put a float32 tensor (at least 2-d, rows first) on the wire; see the module docstring's bounds."""

    name: str = "none"
    #: PLAIN, DENSE or SPARSE: which message carries it
    kind: str = PLAIN
    #: the ``codec`` field of a dense packed message (0: plain float32)
    code: int = 0

    def pack(self, values: np.ndarray) -> Packed:
        """``values`` (float32, finite) in this codec's wire form; a local :class:`ProtocolError` if it cannot
        carry them within its bound."""
        return Packed(values, _NO_SCALES, _NO_INDICES, values.shape)

    def unpack(self, packed: Packed) -> np.ndarray:
        """The float32 tensor of shape ``packed.shape`` that ``packed`` encodes."""
        return packed.data

    def __repr__(self) -> str:
        return f"<codec {self.name}>"


class Float16(Codec):
    name, kind, code = "float16", DENSE, CODEC_FLOAT16

    def pack(self, values: np.ndarray) -> Packed:
        with np.errstate(over="ignore"):
            data = values.astype(FLOAT16)
        if not np.isfinite(data).all():
            big = float(np.abs(values).max())
            raise ProtocolError(f"float16 cannot carry a value of magnitude {big:.4g} (its largest is 65504); set "
                                "[network] compression to \"bfloat16\" or \"int8\" for this party", local=True)
        return Packed(data, _NO_SCALES, _NO_INDICES, values.shape)

    def unpack(self, packed: Packed) -> np.ndarray:
        return packed.data.astype(FLOAT32)


class BFloat16(Codec):
    name, kind, code = "bfloat16", DENSE, CODEC_BFLOAT16

    def pack(self, values: np.ndarray) -> Packed:
        bits = np.ascontiguousarray(values, FLOAT32).view(np.uint32)
        # round to nearest even on the 16 bits dropped; a finite float32 cannot carry into the sign bit
        data = ((bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))) >> 16).astype(np.uint16)
        if (np.bitwise_and(data, 0x7F80) == 0x7F80).any():
            raise ProtocolError("bfloat16: a value within half a step of float32's largest rounds to infinity; "
                                "such activations or gradients mean training diverged", local=True)
        return Packed(data, _NO_SCALES, _NO_INDICES, values.shape)

    def unpack(self, packed: Packed) -> np.ndarray:
        return (packed.data.astype(np.uint32) << 16).view(FLOAT32)


class Int8(Codec):
    name, kind, code = "int8", DENSE, CODEC_INT8

    def pack(self, values: np.ndarray) -> Packed:
        flat = values.reshape(len(values), -1).astype(np.float64)
        absmax = np.abs(flat).max(axis=1, initial=0.0)
        exact = absmax / 127
        scales = exact.astype(FLOAT32)
        low = scales < exact  # round the scale up, so that |x| / scale <= 127
        scales[low] = np.nextafter(scales[low], np.float32(np.inf))
        if (scales > MAX_INT8_SCALE).any():
            raise ProtocolError("int8: a value near float32's largest cannot be scaled; training diverged",
                                local=True)
        safe = np.where(scales > 0, scales, 1).astype(np.float64)
        q = np.clip(np.rint(flat / safe[:, None]), -127, 127).astype(np.int8)
        return Packed(q.reshape(values.shape), scales, _NO_INDICES, values.shape)

    def unpack(self, packed: Packed) -> np.ndarray:
        flat = packed.data.reshape(len(packed.data), -1).astype(FLOAT32)
        return (flat * packed.scales[:, None]).reshape(packed.shape)


class TopK(Codec):
    """Keep the ``ceil(fraction * width)`` largest-magnitude entries of each row (gradients only)."""

    kind = SPARSE

    def __init__(self, fraction: Fraction, *, dtype: np.dtype = FLOAT32, name: str = "") -> None:
        self.fraction = fraction
        self.dtype = np.dtype(dtype)
        self.name = name or f"topk_{fraction}{'_float16' if self.dtype == FLOAT16 else ''}"

    def k(self, width: int) -> int:
        """Entries kept per row of ``width`` entries (exact arithmetic: ``topk_0.1`` keeps 3 of 30)."""
        return min(width, max(1, math.ceil(self.fraction * width)))

    def pack(self, values: np.ndarray) -> Packed:
        flat = values.reshape(len(values), -1)
        width = flat.shape[1]
        k = self.k(width)
        kept = np.argpartition(np.abs(flat), width - k, axis=1)[:, width - k :]
        indices = np.sort(kept, axis=1)
        with np.errstate(over="ignore"):
            data = np.take_along_axis(flat, indices, axis=1).astype(self.dtype)
        if not np.isfinite(data).all():
            raise ProtocolError(f"{self.name}: a kept value is beyond float16's 65504; use topk_<fraction> "
                                "(float32 values)", local=True)
        return Packed(data, _NO_SCALES, indices.astype(UINT32), values.shape)

    def unpack(self, packed: Packed) -> np.ndarray:
        rows = packed.shape[0]
        dense = np.zeros((rows, math.prod(packed.shape[1:])), FLOAT32)
        np.put_along_axis(dense, packed.indices.astype(np.intp), packed.data.astype(FLOAT32), axis=1)
        return dense.reshape(packed.shape)


#: The codecs by name; ``topk_<fraction>`` and ``topk_<fraction>_float16`` are built by :func:`get_codec`.
CODECS: dict[str, Codec] = {c.name: c for c in (Codec(), Float16(), BFloat16(), Int8())}
_DENSE: dict[int, Codec] = {c.code: c for c in CODECS.values() if c.kind == DENSE}
_ANY_TOPK = TopK(Fraction(1))  # unpacking needs no fraction: k comes from the message


def codec_names() -> list[str]:
    """The valid ``[network] compression`` values (top-k as its pattern)."""
    return [*CODECS, "topk_<fraction>", "topk_<fraction>_float16"]


def get_codec(name: str) -> Codec:
    """The codec called ``name``; a :class:`ConfigError` listing the valid names if there is none.

    >>> get_codec("topk_0.1").k(30), get_codec("int8").name
    (3, 'int8')
    """
    codec = CODECS.get(name)
    if codec is not None:
        return codec
    text = name[len("topk_") :] if isinstance(name, str) and name.startswith("topk_") else None
    if text is not None:
        dtype = FLOAT32
        if text.endswith("_float16"):
            text, dtype = text[: -len("_float16")], FLOAT16
        try:
            fraction = Fraction(text)
        except (ValueError, ZeroDivisionError):
            fraction = None
        if fraction is not None and 0 < fraction <= 1 and "/" not in text and text == text.strip():
            return TopK(fraction, dtype=dtype, name=name)
    raise ConfigError(f"unknown compression {name!r}; valid: {', '.join(codec_names())} (0 < fraction <= 1, e.g. "
                      "topk_0.1)")


class Compressor:
    """Packs the tensors one party sends with one codec, keeping per-stream residuals for error feedback.

    Args:
        name: a codec name (:func:`codec_names`).
        error_feedback: carry each training stream's packing error into its next tensor.
    """

    def __init__(self, name: str = "none", *, error_feedback: bool = False) -> None:
        self.codec = get_codec(name)
        self.error_feedback = error_feedback and self.codec.kind != PLAIN
        self._residuals: dict[tuple[int, int, int], np.ndarray] = {}

    def pack_activations(self, cut: int, slot: int, phase: int, epoch: int, step: int, values: np.ndarray) -> Message:
        """The message carrying activations ``values`` (float32, C-contiguous) of ``cut``/``slot``."""
        codec = self.codec
        if codec.kind != DENSE:  # none, and top-k (gradients only)
            return Activations(cut=cut, slot=slot, phase=phase, epoch=epoch, step=step, values=values)
        packed = self._pack((0, cut, slot), values, memory=phase == TRAIN)
        return PackedActivations(cut=cut, slot=slot, phase=phase, epoch=epoch, step=step, codec=codec.code,
                                 data=packed.data, scales=packed.scales)

    def pack_gradients(self, cut: int, slot: int, epoch: int, step: int, values: np.ndarray) -> Message:
        """The message carrying the gradient ``values`` (float32, C-contiguous) of ``cut``/``slot``."""
        codec = self.codec
        if codec.kind == PLAIN:
            return Gradients(cut=cut, slot=slot, epoch=epoch, step=step, values=values)
        packed = self._pack((1, cut, slot), values, memory=True)
        if codec.kind == SPARSE:
            return SparseGradients(cut=cut, slot=slot, epoch=epoch, step=step,
                                   shape=np.array(packed.shape, np.int64), values=packed.data, indices=packed.indices)
        return PackedGradients(cut=cut, slot=slot, epoch=epoch, step=step, codec=codec.code, data=packed.data,
                               scales=packed.scales)

    def _pack(self, stream: tuple[int, int, int], values: np.ndarray, *, memory: bool) -> Packed:
        if not all_finite(values):
            raise ProtocolError("this party's tensor to send is not finite (training diverged?); nothing sent",
                                local=True)
        if not (memory and self.error_feedback):
            return self.codec.pack(values)
        residual = self._residuals.get(stream)
        meant = values
        if residual is not None and residual.shape[1:] == values.shape[1:]:
            meant = values.copy()
            rows = min(len(values), len(residual))
            meant[:rows] += residual[:rows]
        packed = self.codec.pack(meant)
        self._residuals[stream] = meant - self.codec.unpack(packed)
        return packed


def shape_of(msg: Message) -> tuple[int, ...]:
    """The shape of the tensor an activations or gradients message carries, without decoding it.

    Check it against what you expect before :func:`values_of`: decoding allocates that shape.
    """
    kind = type(msg)
    if kind is Activations or kind is Gradients:
        return msg.values.shape  # type: ignore[attr-defined]
    if kind is PackedActivations or kind is PackedGradients:
        return msg.data.shape  # type: ignore[attr-defined]
    if kind is SparseGradients:
        return tuple(msg.shape.tolist())  # type: ignore[attr-defined]
    raise TypeError(f"{kind.__name__} carries no tensor")


def values_of(msg: Message) -> np.ndarray:
    """The float32 tensor of an :class:`Activations`, :class:`Gradients` or packed message (decoded).

    >>> values_of(Compressor("bfloat16").pack_gradients(0, 0, 0, 0, np.full((1, 2), 1.5, np.float32))).tolist()
    [[1.5, 1.5]]
    """
    kind = type(msg)
    if kind is Activations or kind is Gradients:
        return msg.values  # type: ignore[attr-defined]
    if kind is PackedActivations or kind is PackedGradients:
        data = msg.data  # type: ignore[attr-defined]
        return _DENSE[msg.codec].unpack(Packed(data, msg.scales, _NO_INDICES, data.shape))  # type: ignore[attr-defined]
    if kind is SparseGradients:
        return _ANY_TOPK.unpack(Packed(msg.values, _NO_SCALES, msg.indices, shape_of(msg)))  # type: ignore[attr-defined]
    raise TypeError(f"{kind.__name__} carries no tensor")


__all__ = ["CODECS", "Codec", "Compressor", "Packed", "codec_names", "get_codec", "shape_of", "values_of"]
