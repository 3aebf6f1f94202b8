"""A party that fails its own checks before training tells its peers at once: an abort code, never text.

Theory of operation. A party checks its own table, labels and files before it connects (the ID column is there,
the label has two values, a ``--resume`` checkpoint is readable). Said only on its own console, such a failure
would leave each peer dialing or listening in silence until ``network.connect_timeout_s`` runs out. So
:func:`tell_peers` still opens this party's links, for at most :data:`WAIT_S` seconds, sends every peer that
connects one :class:`~vsplit.protocol.abort.Abort` in the run's session (the code of the error: ``BAD_DATA`` for
the party's data, ``SETUP_FAILED`` for its config or files), waits a moment for the peer to hang up (so that the
frame is read before the connection closes), and returns; the caller raises the error it had. A peer prints
``bank aborted: ... (code 7)`` and exits. Nothing but the code crosses: the details stay in this party's log.

Example:
    >>> from vsplit.errors import DataError
    >>> abort_code(DataError("label 'y' has 3 distinct values")).name
    'BAD_DATA'
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

from vsplit.config import PartyConfig
from vsplit.errors import TransportError, VsplitError
from vsplit.protocol.abort import AbortCode

log = logging.getLogger(__name__)

#: how long a party that failed before training waits for its peers to connect, to tell them (at most
#: ``network.connect_timeout_s``): peers started at about the same time hear at once, and a party whose peer never
#: comes gets its prompt back soon
WAIT_S = 30.0
#: how long it then waits for a told peer to hang up before closing the connection itself
HANGUP_S = 5.0


def abort_code(error: BaseException) -> AbortCode:
    """The code a peer is told for ``error``, a failure of this party's own checks before training."""
    from vsplit.runtime.pump import code_for

    code = code_for(error)
    return AbortCode.SETUP_FAILED if code == AbortCode.INTERNAL_ERROR else code


def tell_peers(config: PartyConfig, error: BaseException, *, session: bytes, when: str = "training",
               wait_s: float = WAIT_S) -> list[str]:
    """Tell this party's peers that it stops before ``when`` because of ``error``, which the caller raises
    afterwards: the peers told.

    ``session``: the run's session id (:func:`vsplit.node.session_id`). Best effort: a peer that does not connect
    within ``wait_s`` seconds (or ``network.connect_timeout_s``, if shorter) is not told, and no failure here
    hides ``error``."""
    from vsplit.node.links import open_links, plan_links
    from vsplit.runtime.pump import Pump

    me, code = config.party.name, abort_code(error)
    net = config.network
    wait = min(wait_s, net.connect_timeout_s)
    try:
        plan = plan_links(config)
        print(f"vsplit: {me} stops before {when}; telling {', '.join(sorted(plan))} (abort code {int(code)}), "
              f"waiting up to {wait:.0f} s for {'them' if len(plan) > 1 else 'it'} to connect", file=sys.stderr)
        quick = dataclasses.replace(config, network=dataclasses.replace(net, connect_timeout_s=wait))
        channels, standing = open_links(quick, plan)  # the config's own channels (resumable or not), as the peer's
    except (VsplitError, OSError) as exc:
        log.warning("%s: could not tell the peers why it stops (%s)", me, exc)
        return []
    try:
        pump = Pump(me, dict(channels), session=session, timeout=HANGUP_S)
        pump.abort(code)
        _await_hangup(channels, HANGUP_S)
    finally:
        for channel in channels.values():
            channel.close()
        if standing is not None:
            standing.close()
    log.info("%s: told %s abort code %d before stopping", me, sorted(channels), int(code))
    return sorted(channels)


def _await_hangup(channels: Mapping[str, Any], seconds: float) -> None:
    """Read (and drop) what each peer still sends until it hangs up, for at most ``seconds`` in all: a connection
    closed while the peer's frames lie unread may be reset before the peer has read the abort."""
    deadline = time.monotonic() + seconds
    for channel in channels.values():
        while (left := deadline - time.monotonic()) > 0:
            try:
                channel.recv(timeout=left)  # dropped unread: never decoded
            except TransportError:
                break

