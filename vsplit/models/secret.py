"""The seed of a party's private randomness: a secret only that party holds, kept next to its private key.

Theory of operation. A party's initial weights (its bottom, and the default segments it owns), its dropout stream and
its defence noise must not follow from anything a peer knows: a label party that can rebuild a partner's initial
bottom inverts the first batch of activations it receives, and, knowing the gradients it sent back, follows every
later update (issue 45). They are therefore drawn from the party's *init seed*: 62 random bits made with
:mod:`secrets` on first use and kept in ``<party>.init-seed`` in the folder of the party's private key
(``network.key``; the config file's folder without one), created atomically with mode 0600 and refused, like the key,
when others may read it. The same file gives the same run. What the parties must agree on (batch order, validation
rows) still comes from ``train.seed``. ``train.init_seed = "seed"`` (or setting ``train.seed`` in the config file
without ``train.init_seed``) draws the init from ``train.seed`` as before, with a warning: see docs/privacy.md.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bank.init-seed"
    >>> seed = read_or_create(path)
    >>> seed == read_or_create(path), 0 <= seed < 2**62, oct(path.stat().st_mode & 0o777)
    (True, True, '0o600')
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any

from vsplit.atomic import create_once, refuse_shared
from vsplit.errors import ConfigError

log = logging.getLogger(__name__)

#: the file name's ending: ``<party>.init-seed``
SUFFIX = ".init-seed"
#: the values of ``train.init_seed``; "auto" (a config built without :func:`vsplit.config.load_config`): "secret"
MODES = ("auto", "secret", "seed")
BITS = 62
_warned: set[str] = set()


def secret_path(config: Any) -> Path:
    """Where ``config``'s party keeps its init seed: ``<folder of network.key>/<party>.init-seed`` (relative paths
    from the config file's folder, as every path of the config)."""
    if not config.source:
        raise ConfigError(f"{config.party.name}: this config was not read from a file, so it has no folder to keep "
                          "the party's init seed in; load it with vsplit.config.load_config, or set "
                          "train.init_seed = \"seed\"")
    base = Path(config.source).parent
    key = getattr(config.network, "key", "") if getattr(config, "network", None) is not None else ""
    folder = (base / key).parent if key else base
    return (folder / f"{config.party.name}{SUFFIX}").resolve()


def check_secret_file(path: Path) -> None:
    """Refuse an init seed that others may read (on POSIX), as :func:`vsplit.transport.identity.check_key_file`
    refuses a key."""
    refuse_shared(path, path.stat().st_mode, what="init seed",
                  why="a peer who learns it can rebuild this party's initial weights")


def fresh() -> int:
    """A new init seed: 62 bits from the operating system's cryptographic source (:mod:`secrets`)."""
    return secrets.randbits(BITS)


def read_or_create(path: str | Path) -> int:
    """The init seed kept at ``path``, made (62 random bits, mode 0600) if there is none yet; refused if others may
    read it or it holds anything but the number this function wrote."""
    path = Path(path)
    if not path.exists():
        _create(path, fresh())
    check_secret_file(path)
    text = path.read_text(encoding="ascii", errors="replace").strip()
    if not text.isdigit() or int(text) >= 2**BITS:
        raise ConfigError(f"init seed {path} does not hold a seed (a number below 2**{BITS}); restore it from your "
                          "backup, or delete it to draw a new one (the next run then starts from other weights)")
    return int(text)


def write_secret(path: str | Path, seed: int) -> Path:
    """Write ``seed`` as the init seed at ``path`` (mode 0600; an existing file is refused): to restore a backup, or
    to hand one process the seed another one used."""
    path = Path(path)
    if not 0 <= int(seed) < 2**BITS:
        raise ConfigError(f"an init seed is a number from 0 to 2**{BITS} - 1, got {seed}")
    if path.exists():
        raise ConfigError(f"init seed {path} already exists; delete it first to replace it")
    _create(path, int(seed))
    return path


def _create(path: Path, seed: int) -> None:
    """Create ``path`` holding ``seed``, owner-only from the start; a file made meanwhile by another process of the
    same party (a bag, a search) wins and is kept."""
    create_once(path, f"{seed}\n".encode("ascii"))


def init_seed(config: Any) -> int:
    """The seed of ``config``'s party's private randomness: its secret (:func:`secret_path`), or ``train.seed`` where
    ``train.init_seed = "seed"`` (set, or implied by setting ``train.seed``), with a warning logged once."""
    t = config.train
    if getattr(t, "init_seed", "auto") == "seed":
        name = config.party.name
        if name not in _warned:
            _warned.add(name)
            log.warning("%s: initial weights, dropout and defence noise are seeded from train.seed = %d; a peer who "
                        "knows it can rebuild this party's initial model and invert the first batch it receives. "
                        "Set train.init_seed = \"secret\" to draw them from %s instead (docs/privacy.md)",
                        name, t.seed, secret_path(config))
        return int(t.seed)
    return read_or_create(secret_path(config))
