"""Party configs for a pilot on a bundled preset, written next to the party folders when they are missing.

The bank-marketing pilot uses the committed ``parties/bank/party.toml`` and ``parties/partner/party.toml``; other
pilots get configs of the same shape in their own folder: one per party, with its role in the split, the hub
listening and every other party dialing it.

Example:
    >>> text = party_config("bank", role="label", kind="vertical", peers=["partner"], hub=True, label="default",
    ...                     positive="1")
    >>> "positive_label = 1" in text and 'role = "label"' in text
    True
    >>> 'role = "compute"' in party_config("cloud", role="compute", kind="u_shaped", peers=["bank"], hub=True)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vsplit.atomic import write_atomic


def party_config(
    name: str,
    *,
    role: str,
    kind: str,
    peers: Sequence[str],
    hub: bool,
    label: str | None = None,
    positive: str | None = None,
    tests: bool = True,
) -> str:
    """TOML text of one party's pilot config; ``positive`` is a TOML value (``"yes"`` needs the quotes)."""
    what = {"label": "holds the labels and coordinates training", "feature": "holds feature columns",
            "compute": "holds no data and runs the middle segment"}[role]
    lines = [f"# {name}: the {role} party of a vsplit {kind} pilot; it {what}. It "
             f"{'listens: the other parties dial it' if hub else 'dials the hub'}.",
             "[party]", f'name = "{name}"', f'role = "{role}"', ""]
    if kind != "vertical":
        lines += ["[topology]", f'kind = "{kind}"', ""]
    if role != "compute":
        lines += ["[data]", 'path = "data/train.parquet"']
        if tests:
            lines.append('test_path = "data/test.parquet"')
        lines.append('id_column = "customer_id"')
        if role == "label":
            lines += [f'label = "{label}"', f"positive_label = {positive}"]
        lines.append("")
    pins = ", ".join(f'{p} = "keys/peers/{p}.pem"' for p in peers)
    lines += ["[network]", 'listen = "127.0.0.1:7700"' if hub else 'dial = "127.0.0.1:7700"',
              f'key = "keys/{name}.key"', f'cert = "keys/{name}.pem"', f"peers = {{ {pins} }}", "",
              "[output]", 'dir = "../runs"', 'run_id = "pilot"', ""]
    return "\n".join(lines)


def write_missing_configs(
    root: Path, *, label: str, positive_label: object, kind: str = "vertical", roles: dict[str, str] | None = None
) -> dict[str, Path]:
    """Write ``<party>/party.toml`` under ``root`` for each party unless it exists; return their paths.

    ``roles`` maps party name to role (default: ``bank`` the label party, ``partner`` a feature party); the hub is
    the label party, or the compute party in a U-shaped split.
    """
    roles = roles or {"bank": "label", "partner": "feature"}
    positive = f'"{positive_label}"' if isinstance(positive_label, str) else str(positive_label).lower()
    hub = next(p for p, r in roles.items() if r == ("compute" if kind == "u_shaped" else "label"))
    paths = {}
    for party, role in roles.items():
        peers = [p for p in roles if p != party] if party == hub else [hub]
        path = paths[party] = root / party / "party.toml"
        if not path.exists():
            text = party_config(party, role=role, kind=kind, peers=peers, hub=party == hub, label=label,
                                positive=positive)
            write_atomic(path, text.encode())
    return paths
