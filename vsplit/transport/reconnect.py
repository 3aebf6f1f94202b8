"""Resumable channels between parties: the hub keeps listening for the whole run, partners redial.

Theory of operation. These are the two ends of :class:`~vsplit.transport.resume.ResumableChannel` (whose module
explains numbering, acks and resending); this module says where each new link comes from.

* The dialing party (a partner) connects as :func:`vsplit.transport.connect.dial` does, retrying until the hub is
  up, and then exchanges RESUME envelopes: the hub answers with no token (it knows no session with this party
  yet) and the partner names the channel with a fresh random token. After a drop, the channel redials the same
  address, with the same pinned certificates and the full mutual TLS 1.3 handshake, and resumes only if the hub
  answers with the same token.
* The listening party (the hub) keeps its socket open until every channel is closed. Each connection waits for
  its first TLS record without a thread, then is authenticated in its own thread (at most :data:`MAX_HANDSHAKES`
  at a time, a few per address, each bounded by ``handshake_timeout_s``, and slots strangers cannot take for the
  addresses partners authenticated from: :mod:`vsplit.transport.admission`), so a stranger that stalls its
  handshake delays nobody, and a flood of strangers does not keep a dropped partner from coming back. A
  connection that fails the TLS handshake, the hello or the pin check (an unknown certificate, the certificate of
  another party, no certificate, plaintext) is refused, logged (at a bounded rate) and kept in ``rejections``; it
  never reaches a channel. An authenticated party gets the hub's RESUME (its token and how many frames the hub
  has received), and its own RESUME decides: a new party with no token joins the run (until every pinned party
  has), the same token resumes that party's channel, another token is refused (a restarted process cannot take
  over a running session).

Example (a partner and a hub in one process; ``reconnect_timeout_s`` would come from the config):
    >>> import tempfile, threading
    >>> from pathlib import Path
    >>> from vsplit.transport.identity import create_identity, write_identity
    >>> out = Path(tempfile.mkdtemp())
    >>> bank, insurer = (write_identity(create_identity(p), out) for p in ("bank", "insurer"))
    >>> hub = StandingListener(Credentials.load("bank", own_cert=bank.cert_path, own_key=bank.key_path,
    ...                        peers={"insurer": insurer.cert_path}), address=("127.0.0.1", 0))
    >>> partner = dial_resumable(Credentials.load("insurer", own_cert=insurer.cert_path, own_key=insurer.key_path,
    ...                          peers={"bank": bank.cert_path}), peer="bank", address=hub.address, deadline_s=10)
    >>> accepted = hub.accept_all(deadline_s=10)
    >>> partner.send(b"hello bank")
    >>> bytes(accepted["insurer"].recv(timeout=5))
    b'hello bank'
    >>> for channel in (partner, *accepted.values()):
    ...     channel.close()
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from vsplit.errors import AuthenticationError, ProtocolError, TransportError
from vsplit.transport import admission, numbered
from vsplit.transport.admission import AdmissionPolicy
from vsplit.transport.connect import DEFAULT_DEADLINE_S, Listener, dial
from vsplit.transport.pinning import Credentials
from vsplit.transport.resume import ResumableChannel, ResumeOptions, link_options, read_resume
from vsplit.transport.stream import ChannelOptions
from vsplit.transport.tls import TlsChannel

log = logging.getLogger(__name__)

#: Connections a listener authenticates at the same time (besides the reserved slots); more are refused at once.
MAX_HANDSHAKES = admission.MAX_HANDSHAKES


class EarlierSession(TransportError):
    """The peer still holds a session with an earlier process of this party (it has not yet given it up)."""


def dial_resumable(
    credentials: Credentials,
    *,
    peer: str,
    address: tuple[str, int],
    deadline_s: float = DEFAULT_DEADLINE_S,
    options: ChannelOptions | None = None,
    resume: ResumeOptions | None = None,
    patient: bool = False,
) -> ResumableChannel:
    """Connect to ``peer`` as :func:`~vsplit.transport.connect.dial` does; after a drop the channel redials.

    ``patient``: while ``peer`` still holds a session with an earlier process of this party (:class:`EarlierSession`:
    that process died, and the peer has not yet given it up after its ``reconnect_timeout_s``), dial again every
    half second until ``deadline_s`` (a restarted client coming back to a run, :mod:`vsplit.horizontal.readmit`)."""
    if patient:
        end = time.monotonic() + deadline_s
        while True:
            try:
                return dial_resumable(credentials, peer=peer, address=address, deadline_s=max(end - time.monotonic(),
                                      0.5), options=options, resume=resume)
            except EarlierSession:
                if time.monotonic() + 0.5 > end:
                    raise
                log.info("%s: %r still holds this party's earlier session; dialing again", credentials.party, peer)
                time.sleep(0.5)
    options = options if options is not None else ChannelOptions()
    links = link_options(options)
    who = f"{peer!r}"

    def connect(seconds: float) -> tuple[TlsChannel, numbered.Envelope]:
        link = dial(credentials, peer=peer, address=address, deadline_s=seconds, options=links)
        try:
            return link, read_resume(link, timeout=links.handshake_timeout_s, who=who)
        except BaseException:
            link.close()
            raise

    link, env = connect(deadline_s)
    try:
        if env.token != numbered.NO_TOKEN or env.seq:
            raise EarlierSession(
                f"{who} still runs a session with an earlier process of {credentials.party!r}: stop it (or wait until "
                "it gives up after network.reconnect_timeout_s), then start both parties again with --resume"
            )
        token = os.urandom(numbered.TOKEN_BYTES)
        link.send(numbered.resume(token, 0))
    except BaseException:
        link.close()
        raise
    return ResumableChannel(link, token=token, options=options, resume=resume, redial=connect)


class StandingListener(Listener):
    """The hub's listening socket, open for the whole run: first connections and reconnections of pinned parties.

    :meth:`accept_all` returns when every pinned party has connected; the socket stays open (connections are
    handled on a background thread) until every channel is closed or :meth:`close` is called.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        address: tuple[str, int],
        options: ChannelOptions | None = None,
        resume: ResumeOptions | None = None,
        readmit: bool = False,
        admission: AdmissionPolicy | None = None,
    ) -> None:
        self.channel_options = options if options is not None else ChannelOptions()
        self.resume = resume if resume is not None else ResumeOptions()
        self.readmit = readmit
        super().__init__(credentials, address=address, options=link_options(self.channel_options),
                         admission=admission)
        #: The channel of each party that has connected.
        self.channels: dict[str, ResumableChannel] = {}
        self._returned: list[tuple[str, ResumableChannel]] = []
        self._cond = threading.Condition()
        self._stopped = self._stop
        self.start_reception(self._welcome)

    def accept_all(self, *, deadline_s: float = DEFAULT_DEADLINE_S) -> dict[str, ResumableChannel]:  # type: ignore[override]
        """Wait until every pinned party has connected; refused connections are logged and skipped."""
        deadline = time.monotonic() + deadline_s
        wanted = set(self.credentials.pins)
        with self._cond:
            while set(self.channels) != wanted:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.25))
            channels = dict(self.channels)
        if set(channels) == wanted:
            return channels
        for channel in channels.values():
            channel.close()
        self.close()
        raise self._timed_out(sorted(wanted - set(channels)), deadline_s)

    def take_returned(self) -> list[tuple[str, ResumableChannel]]:
        """With ``readmit``: the new channels of parties whose earlier channel was lost and that connected again
        as a new process (a restarted client), each once, in the order they came."""
        with self._cond:
            out, self._returned = self._returned, []
        return out

    def close(self) -> None:
        """Stop listening (channels stay open, but a dropped one can no longer come back)."""
        super().close()

    # -- one thread per admitted connection (vsplit.transport.reception) ----------------------------------------------
    def _welcome(self, conn: socket.socket, addr: tuple, first: bytes) -> None:
        try:
            link = self.authenticate(conn, addr, first=first)
            try:
                refusal = self._join(link)
            except BaseException:
                link.close()
                raise
            if refusal is not None:
                link.close()
                raise AuthenticationError(refusal)
            self.gate.trust(str(addr[0]))  # its reconnections may take the reserved handshake slots
        except TransportError as exc:
            if not self._stopped.is_set():
                self.refused(addr, exc)
        except (ProtocolError, OSError) as exc:  # whatever one connection does, the listener goes on
            if not self._stopped.is_set():
                self.refused(addr, TransportError(str(exc)))

    def _join(self, link: TlsChannel) -> str | None:
        """Resume handshake of an authenticated link; it joins or resumes its party's channel. The refusal or None."""
        party = link.peer
        with self._cond:
            channel = self.channels.get(party)
        returning = channel is not None and channel.state == "lost" and self.readmit
        if channel is not None and channel.state in ("lost", "done") and not returning:
            return f"{party!r} reconnected after its channel ended ({channel.state})"
        token, received = (channel.token, channel.received) if channel is not None else (numbered.NO_TOKEN, 0)
        if returning:
            token, received = numbered.NO_TOKEN, 0  # a new session with a new process of a party that was lost
        link.send(numbered.resume(token, received))
        env = read_resume(link, timeout=self.options.handshake_timeout_s, who=repr(party))
        if returning:
            if env.token == numbered.NO_TOKEN or env.seq:
                return f"{party!r} tried to resume a session that was lost"
            fresh = ResumableChannel(link, token=env.token, options=self.channel_options, resume=self.resume,
                                     on_close=self._channel_closed)
            with self._cond:
                self.channels[party] = fresh
                self._returned.append((party, fresh))
                self._cond.notify_all()
            log.info("%s: %s came back as a new process (%s)", self.credentials.party, party, link.peer_fingerprint)
            return None
        if channel is None:
            if env.token == numbered.NO_TOKEN or env.seq:
                return f"{party!r} tried to resume a session this party does not know (an earlier run?)"
            with self._cond:
                channel = self.channels.get(party)
                if channel is None:
                    self.channels[party] = ResumableChannel(
                        link, token=env.token, options=self.channel_options, resume=self.resume,
                        on_close=self._channel_closed,
                    )
                    log.info("%s: %s connected (%s)", self.credentials.party, party, link.peer_fingerprint)
                    self._cond.notify_all()
                    return None
        return channel.adopt(link, token=env.token, received=env.seq)

    def _channel_closed(self, channel: ResumableChannel) -> None:
        with self._cond:
            done = set(self.channels) == set(self.credentials.pins) and all(c.closed for c in self.channels.values())
        if done:
            self.close()


__all__ = ["MAX_HANDSHAKES", "EarlierSession", "StandingListener", "dial_resumable"]
