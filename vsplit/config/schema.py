"""The party config: one TOML file per organization, as a typed tree with defaults.

A minimal label-party config::

    [party]
    name = "bank"
    role = "label"

    [data]
    path = "bank.parquet"
    label = "y"

    [network]
    listen = "127.0.0.1:7700"
    key = "keys/bank.key"
    cert = "keys/bank.pem"
    peers = { partner = "keys/partner.pem" }

Everything else has a default. Paths are relative to the config file's folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartySection:
    name: str
    role: str  # "label" or "feature"


@dataclass(frozen=True)
class DataSection:
    path: str
    id_column: str = "customer_id"
    features: tuple[str, ...] | None = None
    categorical: tuple[str, ...] | None = None
    label: str | None = None
    positive_label: str | int | bool | None = None
    missing: str = "error"
    scaling: str = "quantile"
    #: a held-out table (same columns) the pilot scores after training
    test_path: str | None = None


@dataclass(frozen=True)
class ModelSection:
    embedding_width: int = 16
    bottom_hidden: tuple[int, ...] = (64,)
    top_hidden: tuple[int, ...] = (32,)
    merge: str = "concat"
    dropout: float = 0.0
    #: embedding widths of the partners (label party only); default: this party's embedding_width for each
    peer_widths: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainSection:
    epochs: int = 20
    batch_size: int = 256
    optimizer: str = "adam"
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0
    validation_fraction: float = 0.1
    patience: int | None = 3
    #: torch threads of this party's process; 1 avoids two parties on one machine fighting over cores
    threads: int = 1


@dataclass(frozen=True)
class PsiSection:
    case_fold: bool = False
    duplicates: str = "error"
    reveal: str = "both"


@dataclass(frozen=True)
class PrivacySection:
    #: defenses this party runs, as `vsplit privacy defenses` lists them (e.g. "clip_noise" at the label party,
    #: "nopeek" or "embedding_noise" at a feature party); several are joined with "+" or listed
    defenses: tuple[str, ...] = ()


@dataclass(frozen=True)
class NetworkSection:
    key: str
    cert: str
    peers: dict[str, str]
    listen: str | None = None
    dial: str | None = None
    connect_timeout_s: float = 120.0
    read_timeout_s: float = 300.0
    max_frame_mb: int = 64


@dataclass(frozen=True)
class OutputSection:
    dir: str = "runs"
    run_id: str = "vsplit-run"
    #: label party: also train the label-party-only baseline for the report
    baselines: bool = True


@dataclass(frozen=True)
class PartyConfig:
    party: PartySection
    data: DataSection
    network: NetworkSection
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainSection = field(default_factory=TrainSection)
    psi: PsiSection = field(default_factory=PsiSection)
    privacy: PrivacySection = field(default_factory=PrivacySection)
    output: OutputSection = field(default_factory=OutputSection)
    #: the file the config came from (for resolving relative paths and error messages)
    source: str = ""
