"""The explanation exchange of ``vsplit explain`` over a serving link: its messages, wrapped one per frame.

Theory of operation. Reason codes on ``/v1/score`` come from the same computation as ``vsplit explain``: the same
sans-IO :class:`~vsplit.explain.machine.ExplainMachine` at the bank (the coordinator) and at each partner, built by
the same :func:`~vsplit.explain.session.explain_machine`. Only the carriage differs: instead of a pump over a
channel of their own, their messages travel on the serving link, each encoded by the codec (in the link's serving
session, numbered per explanation and direction) and carried in an :class:`~vsplit.serve.messages.ExplainStep` of
the explanation's request number, so several explanations and the scoring requests share the link. Each side
accepts only the explanation messages its peer may send (:data:`FROM_BANK`, :data:`FROM_PARTNER`), in order.

Example:
    >>> import numpy as np
    >>> from vsplit.explain.messages import GroupAttribution
    >>> msg = GroupAttribution(chunk=0, totals=np.array([0.25]), top=np.zeros((1, 0), np.int32), names="")
    >>> step = wrap(7, msg, session=b"s" * 16, seq=0)
    >>> unwrap(step, session=b"s" * 16, seq=0, allowed=FROM_PARTNER).totals.tolist()
    [0.25]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vsplit.errors import ProtocolError
from vsplit.explain.messages import (
    ExplainRequest,
    GroupAttribution,
    KnotActivations,
    PathActivations,
    PathGradients,
    PieceGradients,
)
from vsplit.serve.messages import ExplainStep
from vsplit.transport import codec

#: what the bank may send a partner in an explanation, and what a partner may send back (its path activations on
#: the cut, then one number per row: its group's attribution; column names only if its [explain] share_top_k allows)
FROM_BANK = (ExplainRequest, PathGradients, PieceGradients)
FROM_PARTNER = (PathActivations, KnotActivations, GroupAttribution)


def wrap(request: int, msg: Any, *, session: bytes, seq: int) -> ExplainStep:
    """``msg`` (an explanation message) as step ``seq`` of explanation ``request`` in the serving ``session``."""
    frame = codec.encode(msg, session=session, seq=seq)
    return ExplainStep(request=request, frame=np.frombuffer(bytes(frame), dtype=np.uint8))


def unwrap(step: ExplainStep, *, session: bytes, seq: int, allowed: tuple[type, ...]) -> Any:
    """The explanation message ``step`` carries: decoded by the codec (never unpickled), of the serving ``session``,
    numbered ``seq`` (the next one expected) and of a type in ``allowed``; else :class:`ProtocolError`."""
    header, msg = codec.decode(step.frame.tobytes())
    if header.session != session:
        raise ProtocolError("an explanation step of another session; refused")
    if header.seq != seq:
        raise ProtocolError(f"explanation step {header.seq} out of order (expected {seq}): replayed or lost")
    if not isinstance(msg, allowed):
        raise ProtocolError(f"{type(msg).__name__} is not an explanation message this side accepts")
    return msg


def unexplainable(node: Any) -> str | None:
    """Why a party's loaded model of a run cannot be explained as ``vsplit explain`` explains it (``None``: it
    can): a bag of networks, a model that is not a split network, or a party holding neither a saved baseline nor
    its training rows (the reference every attribution starts from)."""
    networks = getattr(node, "networks", None)
    if networks is None:
        return "its model is not a split network (vsplit explain explains split networks)"
    if len(networks) > 1:
        return (f"it is a bag of {len(networks)} networks (train.networks), whose score is the mean of their "
                "probabilities: vsplit explain explains one network")
    return without_baseline(node.name, node.party)


def without_baseline(name: str, party: Any) -> str | None:
    """Why party ``name``'s network ``party`` has no reference for its attributions (``None``: it has one): neither
    a saved baseline nor its training rows."""
    inputs = getattr(party, "inputs", None)
    if getattr(party, "baseline", None) is None and (inputs is None or len(inputs[1]) == 0):
        return f"{name} holds no training rows, the baseline its attributions start from"
    return None


def fit_baseline(party: Any, topology: Any) -> None:
    """Fit ``party``'s baseline once, as ``vsplit explain`` fits it (the mean of its training rows, see
    :func:`~vsplit.explain.session.baseline_inputs`), and keep it on the party, where
    :func:`~vsplit.explain.session.explain_machine` takes a kept baseline instead of fitting one per explanation."""
    from vsplit.explain.paths import Baseline
    from vsplit.explain.session import baseline_inputs

    if getattr(party, "baseline", None) is not None:
        return
    (source,) = [s for s in topology.segments_of(party.name) if s.is_source]
    module = party.modules_for(topology, task_width=getattr(party, "task_width", 1))[source.name]
    party.baseline = Baseline.fit(module, baseline_inputs(party, ()))
