"""The clients' shared init seed: every client's replicated segment starts from it, and the server does not know it.

Theory of operation. In a horizontal split the clients train copies of one segment that must start identical at
every client (hand-offs and averages move it between them). Drawn from ``train.seed`` and the segment's name, as
before issue 45, the server could rebuild it from what its own config says and invert the first batch of
activations every client sends it. It is therefore drawn from a seed only the clients hold: ``clients.init-seed`` in
each client's key folder (next to its ``<client>.init-seed``, :mod:`vsplit.models.secret`; same format, mode 0600,
refused when others may read it). The first client of ``topology.clients`` makes it on first use; every other client
gets a copy from it, as it got its certificate (``vsplit pilot`` writes the same file into every bank's key folder),
and stops with an error naming that fix without one. Each client's own randomness (its dropout) and the server's
segments and dropout come from the party's own init seed. With ``train.init_seed = "seed"`` all of it comes from
``train.seed`` as before (warned).

Example:
    >>> import tempfile, pathlib
    >>> from vsplit.config.schema import *
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> def client(name):
    ...     return PartyConfig(party=PartySection(name=name, role="label"), source=str(folder / name / "party.toml"),
    ...                        network=NetworkSection(key=f"keys/{name}.key", cert="", peers={}),
    ...                        topology=TopologySection(kind="horizontal", clients=("a", "b"), server="server"),
    ...                        train=TrainSection(init_seed="secret"))
    >>> seed = clients_init_seed(client("a"))  # the first client makes it
    >>> try:
    ...     clients_init_seed(client("b"))
    ... except ConfigError as exc:
    ...     print(str(exc).split(" (")[0], "|", str(exc).split(". ")[-1][:42])
    b: the clients' shared init seed is missing | Copy clients.init-seed from a's key folder
    >>> _ = write_secret(clients_secret_path(client("b")), seed)  # the copy, as vsplit pilot makes
    >>> clients_init_seed(client("b")) == seed
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vsplit.errors import ConfigError
from vsplit.models.secret import SUFFIX, init_seed, read_or_create, secret_path, write_secret  # noqa: F401 (doctest)

#: the shared file's name, in every client's key folder
FILE = f"clients{SUFFIX}"


def clients_secret_path(config: Any) -> Path:
    """Where ``config``'s client keeps the clients' shared init seed: next to its own (``network.key``'s folder)."""
    return secret_path(config).parent / FILE


def clients_init_seed(config: Any) -> int:
    """The seed of the clients' replicated segment: ``clients.init-seed`` (made by the first client of
    ``topology.clients`` on first use, refused missing at any other), or ``train.seed`` with ``train.init_seed =
    "seed"`` (warned by :func:`vsplit.models.secret.init_seed`)."""
    if getattr(config.train, "init_seed", "auto") == "seed":
        init_seed(config)  # the warning, once per party
        return int(config.train.seed)
    path = clients_secret_path(config)
    me, first = config.party.name, config.topology.clients[0]
    if me != first and not path.exists():
        raise ConfigError(f"{me}: the clients' shared init seed is missing ({path}): every client starts from the "
                          "same initial segment, drawn from a seed only the clients hold so that the server cannot "
                          f"rebuild it. Copy {FILE} from {first}'s key folder (its first run makes it), as you copied "
                          f"its certificate, keeping mode 0600 (`chmod 600 {path}`)")
    return read_or_create(path)
