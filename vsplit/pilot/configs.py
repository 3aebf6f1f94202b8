"""Party configs for a pilot on a bundled preset, written next to the party folders when they are missing.

The bank-marketing pilot uses the committed ``parties/bank/party.toml`` and ``parties/partner/party.toml``; other
presets get configs of the same shape in their own folder.

Example:
    >>> text = label_config(label="default", positive="1")
    >>> "positive_label = 1" in text and 'role = "label"' in text
    True
"""

from __future__ import annotations

from pathlib import Path

from vsplit.runtime.atomic import write_atomic

_LABEL = """# The label party of a vsplit pilot: it listens; partners dial in.
[party]
name = "bank"
role = "label"

[data]
path = "data/train.parquet"
test_path = "data/test.parquet"
id_column = "customer_id"
label = "{label}"
positive_label = {positive}

[network]
listen = "127.0.0.1:7700"
key = "keys/bank.key"
cert = "keys/bank.pem"
peers = {{ partner = "keys/peers/partner.pem" }}

[output]
dir = "../runs"
run_id = "pilot"
"""

_FEATURE = """# A feature party of a vsplit pilot: it dials the label party.
[party]
name = "partner"
role = "feature"

[data]
path = "data/train.parquet"
test_path = "data/test.parquet"
id_column = "customer_id"

[network]
dial = "127.0.0.1:7700"
key = "keys/partner.key"
cert = "keys/partner.pem"
peers = { bank = "keys/peers/bank.pem" }

[output]
dir = "../runs"
run_id = "pilot"
"""


def label_config(*, label: str, positive: str) -> str:
    """TOML text of a label-party config; ``positive`` is a TOML value (``"yes"`` needs the quotes)."""
    return _LABEL.format(label=label, positive=positive)


def write_missing_configs(root: Path, *, label: str, positive_label: object) -> dict[str, Path]:
    """Write ``bank/party.toml`` and ``partner/party.toml`` under ``root`` unless they exist."""
    positive = f'"{positive_label}"' if isinstance(positive_label, str) else str(positive_label).lower()
    paths = {"bank": root / "bank" / "party.toml", "partner": root / "partner" / "party.toml"}
    texts = {"bank": label_config(label=label, positive=positive), "partner": _FEATURE}
    for party, path in paths.items():
        if not path.exists():
            write_atomic(path, texts[party].encode())
    return paths
