"""A live console around one party command: ``vsplit train``, a pilot's party, ``vsplit serve``.

:func:`live_console` starts the console when ``--console`` is given or ``[console] enabled = true``, hands the party's
node (or service) a :class:`~vsplit.console.state.ConsoleState`, prints the address to open, and marks the run done
or failed when the command ends (then stops the console: the finished run is ``vsplit console --runs DIR``'s).

Example (not run here: it listens on a port):
    >>> with live_console(config, enabled=True, mode="train", node=node) as state:  # doctest: +SKIP
    ...     node.run()
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vsplit.console.state import ConsoleState


@contextmanager
def live_console(config: Any, *, enabled: bool, mode: str, node: Any = None,
                 folder: Path | None = None) -> Iterator[ConsoleState | None]:
    """Serve ``config``'s party's console while the block runs, if ``enabled`` or ``console.enabled``; the state
    (``None`` when off). ``node``: a :class:`~vsplit.node.PartyNode` whose run it watches; ``folder``: the run
    folder whose checkpoints and outputs it lists (default: the node's)."""
    if not (enabled or config.console.enabled):
        yield None
        return
    from vsplit.console.server import ConsoleSettings, announce, live_views, start_console

    settings = ConsoleSettings.of(config)  # refuses a non-loopback host without a token, before anything starts
    state = ConsoleState(party=config.party.name, role=config.party.role, topology=config.topology.kind,
                         run_id=config.output.run_id, mode=mode,
                         folder=folder if folder is not None else getattr(node, "folder", None))
    state.expect_peers(dict.fromkeys(config.network.peers))
    if node is not None:
        node.console = state
    server = start_console(live_views(state), settings)
    print(announce(server, config.party.name, token=settings.token is not None), file=sys.stderr, flush=True)
    try:
        yield state
    except BaseException as exc:
        state.finished(error=exc)
        raise
    else:
        state.finished()
    finally:
        server.close()
