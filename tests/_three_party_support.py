"""Three parties as a new user would set them up by hand: a bank listening, "shop" and "telco" dialing.

The data is a 3-way vertical partition of the bundled UCI bank sample (4,521 rows): the bank holds the profile and
the label, the shop the credit columns, the telco the call records. Configs are hand-written as in docs/pilot.md.
"""

from __future__ import annotations

from pathlib import Path

from _pilot_support import hand_secrets

from vsplit.datasets import load
from vsplit.datasets.partition import partition_train_test
from vsplit.pilot.prepare import ensure_keys, export_tables

COLUMNS = {
    "bank": ["age", "job", "marital", "education", "y"],
    "shop": ["default", "balance", "housing", "loan"],
    "telco": ["contact", "day", "month", "duration", "campaign", "pdays", "previous", "poutcome"],
}
PARTNERS = ("shop", "telco")

_BANK = """[party]
name = "bank"
role = "label"

[data]
path = "data/train.parquet"
test_path = "data/test.parquet"
id_column = "customer_id"
label = "y"
positive_label = "yes"

[network]
listen = "127.0.0.1:{port}"
key = "keys/bank.key"
cert = "keys/bank.pem"
peers = {{ shop = "keys/peers/shop.pem", telco = "keys/peers/telco.pem" }}
connect_timeout_s = 60
read_timeout_s = 60

[output]
dir = "../runs"
run_id = "{run_id}"
baselines = false
"""

_PARTNER = """[party]
name = "{name}"
role = "feature"

[data]
path = "data/train.parquet"
test_path = "data/test.parquet"
id_column = "customer_id"

[network]
dial = "127.0.0.1:{port}"
key = "keys/{name}.key"
cert = "keys/{name}.pem"
peers = {{ bank = "keys/peers/bank.pem" }}
connect_timeout_s = 60
read_timeout_s = 60

[output]
dir = "../runs"
run_id = "{run_id}"
"""


def prepare_three_parties(root: Path, *, port: int, run_id: str, extra: str = "", seed: int = 0) -> dict[str, Path]:
    """Tables, keys and hand-written ``party.toml`` files for bank, shop and telco under ``root``; the configs."""
    source = load("bank")
    tables = partition_train_test(source, columns=COLUMNS, label_party="bank", label="y", seed=seed)
    export_tables(tables, root)
    ensure_keys(root, list(COLUMNS))
    configs = {}
    for party in COLUMNS:
        template = _BANK if party == "bank" else _PARTNER
        configs[party] = root / party / "party.toml"
        configs[party].write_text(template.format(name=party, port=port, run_id=run_id) + extra)
    hand_secrets(configs)  # the in-process references' init seed (random_state=0)
    return configs
