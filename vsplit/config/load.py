"""Load and validate a party config: every problem is reported at once, each naming its key path.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "party.toml").write_text('''
    ... [party]
    ... name = "partner"
    ... role = "feature"
    ... [data]
    ... path = "partner.csv"
    ... label = "y"
    ... [train]
    ... epochs = "five"
    ... ''')
    >>> load_config(folder / "party.toml", check_files=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: .../party.toml has 3 problems:
      - network: missing section (needs key, cert, peers)
      - train.epochs: expected an integer, got 'five'
      - data.label: only the label party holds labels; remove it from this feature party's config
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from vsplit.config.names import name_problem
from vsplit.config.recipe import recipe_checks
from vsplit.config.schema import PartyConfig
from vsplit.errors import ConfigError
from vsplit.protocol.training.messages import MAX_AHEAD

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROLES = ("label", "feature", "compute")
KINDS = ("vertical", "vanilla", "u_shaped", "horizontal")
TASKS = ("binary", "multiclass", "regression")


def load_config(
    path: str | Path, *, overrides: list[str] | tuple[str, ...] = (), check_files: bool = True
) -> PartyConfig:
    """Read ``path``, apply ``--set key.path=value`` overrides, validate everything, return the typed config."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found; pass --config with the path to your party.toml")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8") from None
    for item in overrides:
        apply_override(raw, item)
    errors: list[str] = []
    config = _build(PartyConfig, {**raw, "source": str(path)}, "", errors)
    if config is not None and config.train.init_seed == "auto":  # train.seed set in the file (or --set): "seed"
        train = raw.get("train") if isinstance(raw.get("train"), dict) else {}
        config = dataclasses.replace(config, train=dataclasses.replace(
            config.train, init_seed="seed" if "seed" in train else "secret"))
    if config is not None:
        errors += _cross_checks(config, path.parent, check_files=check_files)
    elif "party" in raw and isinstance(raw.get("data"), dict) and raw["data"].get("label") is not None:
        if isinstance(raw["party"], dict) and raw["party"].get("role") == "feature":
            errors.append(_LABEL_ON_FEATURE)
    if errors:
        listing = "\n".join(f"  - {e}" for e in errors)
        raise ConfigError(f"{path} has {len(errors)} problem{'s' if len(errors) > 1 else ''}:\n{listing}")
    assert config is not None
    return config


_LABEL_ON_FEATURE = "data.label: only the label party holds labels; remove it from this feature party's config"


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Apply one ``dotted.key=value`` override; the value is parsed as TOML (bare words as strings).

    >>> raw = {}
    >>> apply_override(raw, "train.epochs=5"); apply_override(raw, "party.name=bank")
    >>> raw
    {'train': {'epochs': 5}, 'party': {'name': 'bank'}}
    """
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.epochs=5")
    key, text = item.split("=", 1)
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    node = raw
    parts = key.strip().split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {item!r}: {part!r} is not a section")
    node[parts[-1]] = value


def resolve(config: PartyConfig, relative: str) -> Path:
    """A path from the config, relative to the config file's folder."""
    return (Path(config.source).parent / relative).resolve()


# -- building the typed tree ---------------------------------------------------------------------------------------
def _build(cls: type, raw: Any, prefix: str, errors: list[str]) -> Any:
    if not isinstance(raw, dict):
        errors.append(f"{prefix or 'config'}: expected a table, got {type(raw).__name__}")
        return None
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in fields:
            names = sorted(f for f in fields if f != "source")
            close = difflib.get_close_matches(key, names, n=1)  # a typo: "lable" -> "label"
            hint = f"did you mean {prefix}{close[0]}? " if close else ""
            errors.append(f"{prefix}{key}: unknown key; {hint}valid keys here: {', '.join(names)}")
    values = {}
    ok = True
    for name, spec in fields.items():
        where = f"{prefix}{name}"
        if name not in raw:
            required = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
            if required:
                kind = hints[name]
                if dataclasses.is_dataclass(kind):
                    needs = [f.name for f in dataclasses.fields(kind) if f.default is dataclasses.MISSING
                             and f.default_factory is dataclasses.MISSING]
                    errors.append(f"{where}: missing section (needs {', '.join(needs)})")
                else:
                    errors.append(f"{where}: missing (required)")
                ok = False
            continue
        value = _coerce(raw[name], hints[name], where, errors)
        if value is _INVALID:
            ok = False
        else:
            values[name] = value
    return cls(**values) if ok else None


_INVALID = object()


def _coerce(value: Any, hint: Any, where: str, errors: list[str]) -> Any:
    if dataclasses.is_dataclass(hint):
        built = _build(hint, value, f"{where}.", errors)
        return _INVALID if built is None else built
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for option in options:
            trial: list[str] = []
            result = _coerce(value, option, where, trial)
            if not trial:
                return result
        errors.append(f"{where}: expected {' or '.join(_name(o) for o in options)}, got {value!r}")
        return _INVALID
    if origin is tuple:
        if not isinstance(value, list):
            errors.append(f"{where}: expected a list, got {value!r}")
            return _INVALID
        items = [_coerce(v, args[0], f"{where}[{i}]", errors) for i, v in enumerate(value)]
        return _INVALID if _INVALID in items else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            errors.append(f"{where}: expected a table of name = value, got {value!r}")
            return _INVALID
        items = {k: _coerce(v, args[1], f"{where}.{k}", errors) for k, v in value.items()}
        return _INVALID if _INVALID in items.values() else items
    if hint is float and type(value) is int:
        return float(value)
    if hint in (str, int, float, bool) and type(value) is hint:
        return value
    errors.append(f"{where}: expected {_name(hint)}, got {value!r}")
    return _INVALID


def _name(hint: Any) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(hint, str(hint))


# -- rules between keys --------------------------------------------------------------------------------------------
def _cross_checks(config: PartyConfig, folder: Path, *, check_files: bool) -> list[str]:
    errors = []
    party, data, net = config.party, config.data, config.network
    kind = config.topology.kind
    named = [("party.name", party.name), ("output.run_id", config.output.run_id),
             *((f"network.peers.{peer}", peer) for peer in net.peers)]
    errors += [problem for key, value in named if (problem := name_problem(key, value))]
    from vsplit.config.boosting import boosting_checks

    errors += boosting_checks(config)
    from vsplit.config.woe import woe_checks

    errors += woe_checks(config)
    from vsplit.config.scorecard import scorecard_checks

    errors += scorecard_checks(config)
    from vsplit.config.ensemble import ensemble_checks

    errors += ensemble_checks(config)
    if kind == "horizontal":
        from vsplit.config.horizontal import horizontal_checks

        return errors + recipe_checks(config) + horizontal_checks(config) + _limit_checks(config) + \
            (file_checks(config, folder) if check_files else [])
    errors += recipe_checks(config)
    from vsplit.tune.settings import tune_checks

    errors += tune_checks(config)
    if party.role not in ROLES:
        errors.append(f"party.role: must be 'label', 'feature' or 'compute', got {party.role!r}")
    if kind not in KINDS:
        errors.append(f"topology.kind: must be one of {', '.join(KINDS)}; got {kind!r}")
    if config.topology.task not in TASKS:
        errors.append(f"topology.task: must be one of {', '.join(TASKS)}; got {config.topology.task!r}")
    if party.role == "label" and not data.label:
        errors.append("data.label: the label party must name its label column")
    if party.role in ("feature", "compute") and data.label is not None:
        errors.append(_LABEL_ON_FEATURE)
    if party.role != "compute" and not data.path:
        errors.append("data.path: missing; point it at this party's CSV or Parquet file")
    if data.stream and not data.path.lower().endswith((".parquet", ".pq")):
        errors.append(f"data.stream: reads batches from a Parquet file, and data.path is {data.path!r}; convert it "
                      "to Parquet or set stream = false")
    if party.role == "compute" and (data.path or data.test_path):
        errors.append("data: a compute party holds no data; remove data.path and data.test_path")
    if party.role == "compute" and kind != "u_shaped":
        errors.append(f"party.role: a compute party (no data) takes part only in a u_shaped split, not {kind!r}")
    if kind == "u_shaped" and party.role == "feature":
        errors.append("party.role: a u_shaped split has a label party (the client) and a compute party (the server)")
    hub = party.role == ("compute" if kind == "u_shaped" else "label")
    if hub and not net.listen:
        errors.append(f"network.listen: the {party.role} party is the hub the others reach, so it listens; set e.g. "
                      "listen = \"0.0.0.0:7700\"")
    if not hub and party.role in ROLES and not net.dial:
        errors.append("network.dial: this party dials the hub (the label party, or the u_shaped server); set e.g. "
                      "dial = \"bank.example:7700\"")
    if party.name in net.peers:
        errors.append(f"network.peers.{party.name}: a party cannot be its own peer")
    if not net.peers:
        errors.append("network.peers: name at least one peer and the path to its certificate")
    if not hub and len(net.peers) != 1:
        errors.append("network.peers: this party talks to exactly one peer, the hub")
    merges = ("concat", "sum", "mean", "attention")
    for key, allowed in (("train.optimizer", ("adam", "adamw", "sgd")), ("model.merge", merges),
                         ("psi.duplicates", ("error", "first")), ("psi.reveal", ("both", "label_party")),
                         ("data.missing", ("error", "impute")), ("data.scaling", ("quantile", "standard")),
                         ("train.init_seed", ("auto", "secret", "seed"))):
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        if value not in allowed:
            errors.append(f"{key}: must be one of {', '.join(allowed)}; got {value!r}")
    train = config.train
    batch = 1 if train.batch_size is None else train.batch_size  # left out: fitted to the rows (train.min_steps)
    for key, value, low in (("train.epochs", train.epochs, 1), ("train.batch_size", batch, 1),
                            ("model.embedding_width", config.model.embedding_width, 1),
                            ("train.min_class_rows", train.min_class_rows, 1),
                            ("train.min_steps", train.min_steps, 0)):
        if value < low:
            errors.append(f"{key}: must be at least {low}, got {value}")
    if train.networks < 1:
        errors.append(f"train.networks: must be at least 1 (1: one network; e.g. 5 for the bag the quality benchmark "
                      f"scores), got {train.networks}")
    if train.networks > 1 and config.privacy.detectors:
        errors.append("train.networks, privacy.detectors: the detectors watch one network's training; set "
                      "networks = 1 to run detectors")
    if net.reconnect_timeout_s < 0:
        errors.append(f"network.reconnect_timeout_s: must be 0 (no reconnects) or positive, got "
                      f"{net.reconnect_timeout_s}")
    errors += _limit_checks(config)
    for key, value in (("train.pipeline_window", train.pipeline_window), ("train.local_steps", train.local_steps)):
        if not 1 <= value <= MAX_AHEAD:
            errors.append(f"{key}: must be 1 (exact) to {MAX_AHEAD}, got {value}")
    if train.pipeline_window > 1 and train.local_steps > 1:
        errors.append("train.pipeline_window, train.local_steps: choose one way to run ahead; set the other to 1")
    if train.pipeline_window * train.local_steps > 1 and kind == "u_shaped":
        errors.append("train.pipeline_window, train.local_steps: a u_shaped split cannot run ahead (the client also "
                      "awaits the middle's output); set both to 1")
    if not 0 <= train.validation_fraction < 1:
        errors.append(f"train.validation_fraction: must be in [0, 1), got {train.validation_fraction}")
    metric = {"binary": "val_auc", "multiclass": "val_accuracy", "regression": "val_rmse"}.get(config.topology.task)
    if train.monitor not in ("auto", "val_loss", metric):
        errors.append(f"train.monitor: must be auto, val_loss or {metric} (the {config.topology.task} task's metric); "
                      f"got {train.monitor!r}")
    errors += _defense_checks(config)
    errors += _detector_checks(config)
    errors += _compression_checks(config)
    errors += _psi_checks(config)
    errors += _serve_front_checks(config)
    errors += _serve_partner_checks(config)
    if not 0 <= config.console.port <= 65535:
        errors.append(f"console.port: must be 0 (any free port) to 65535, got {config.console.port}")
    if check_files:
        errors += file_checks(config, folder)
    return errors


def file_checks(config: PartyConfig, folder: Path) -> list[str]:
    """The files a config names exist: its table, its key and certificate, its peers' certificates."""
    errors: list[str] = []
    data, net, party = config.data, config.network, config.party
    if data.path and not (folder / data.path).is_file():
        errors.append(f"data.path: {folder / data.path} not found; point it at this party's CSV or Parquet file")
    for key, file in (("network.key", net.key), ("network.cert", net.cert)):
        if not (folder / file).is_file():
            errors.append(
                f"{key}: {folder / file} not found; run `vsplit keys new --party {party.name} --out "
                f"{(folder / file).parent}`"
            )
    for peer, file in {**net.peers, **net.client_certs}.items():
        if not (folder / file).is_file():
            errors.append(
                f"network.peers.{peer}: certificate not found at {folder / file}; ask {peer} for its certificate "
                f"(they create it with `vsplit keys new --party {peer}`) and check its fingerprint out of band"
            )
    return errors


def _defense_checks(config: PartyConfig) -> list[str]:
    from vsplit.privacy.defenses import sides  # the light catalog: no PyTorch unless a defense has options

    errors = []
    for i, text in enumerate(config.privacy.defenses):
        try:
            used = sides(text)
        except ConfigError as exc:
            errors.append(f"privacy.defenses[{i}]: {exc}")
            continue
        wrong = {"label": "feature", "feature": "label"}.get(config.party.role)
        if wrong is None:
            errors.append(f"privacy.defenses[{i}]: a compute party runs no defenses; configure them at the client")
            continue
        if wrong in used:
            errors.append(f"privacy.defenses[{i}]: {text!r} runs at the {wrong} party, not at this {config.party.role} "
                          f"party; configure it in the {wrong} party's party.toml")
    return errors


def _detector_checks(config: PartyConfig) -> list[str]:
    from vsplit.privacy.detectors import NAMES  # the names only: no PyTorch

    privacy, kind, role = config.privacy, config.topology.kind, config.party.role
    if not privacy.detectors:
        extra = [key for key in ("detector_labels", "canary_column") if getattr(privacy, key) is not None]
        return [f"privacy.{key}: only used with privacy.detectors; remove it or configure detectors" for key in extra]
    client = (kind, role) in (("vanilla", "feature"), ("u_shaped", "label"))
    if not client:
        return ["privacy.detectors: only the client of a vanilla split (role feature) or of a u_shaped split (role "
                "label) runs detectors: it receives the server's gradients and knows the labels; remove them here"]
    errors = []
    names = []
    for i, text in enumerate(privacy.detectors):
        name = text.partition(":")[0].strip()
        names.append(name)
        if name not in NAMES:
            errors.append(f"privacy.detectors[{i}]: unknown detector {name!r}; choose from {', '.join(NAMES)}")
        elif ":" in text:
            from vsplit.privacy.detectors import make_detector  # options: the class checks them (loads PyTorch)

            try:
                make_detector(text)
            except ConfigError as exc:
                errors.append(f"privacy.detectors[{i}]: {exc}")
    if kind == "vanilla" and not privacy.detector_labels:
        errors.append("privacy.detector_labels: a vanilla client's detectors need the labels it handed the server; "
                      "name the column of its table that holds them")
    if kind == "u_shaped" and privacy.detector_labels:
        errors.append("privacy.detector_labels: a u_shaped client's detectors use its own data.label; remove it")
    if ("splitguard" in names) != (privacy.canary_column is not None):
        errors.append("privacy.canary_column: needed with detector 'splitguard' and only then: name the true/false "
                      "column flagging the canary rows (vsplit.privacy.detectors.plant_canaries makes them)")
    if config.train.pipeline_window * config.train.local_steps > 1:
        errors.append("privacy.detectors: a client running ahead (train.pipeline_window, train.local_steps) has sent "
                      "later activations before it judges a gradient; set both to 1 to run detectors")
    return errors


def _psi_checks(config: PartyConfig) -> list[str]:
    import importlib.util

    from vsplit.psi.buckets import MAX_BUCKETS

    psi, errors = config.psi, []
    if not 1 <= psi.buckets <= MAX_BUCKETS:
        errors.append(f"psi.buckets: must be 1 (no buckets) to {MAX_BUCKETS}, got {psi.buckets}; 16 is a good value")
    for key, value in (("psi.memory_budget_mb", psi.memory_budget_mb), ("psi.workers", psi.workers)):
        if value < 0:
            errors.append(f"{key}: must be 0 or more, got {value}")
    if psi.backend not in ("process", "ray"):
        errors.append(f"psi.backend: must be one of process, ray; got {psi.backend!r}")
    elif psi.backend == "ray" and importlib.util.find_spec("ray") is None:
        errors.append("psi.backend: 'ray' needs Ray, which is not installed here; pip install 'vsplit[ray]' (or set "
                      "psi.backend = \"process\")")
    elif psi.backend == "process" and psi.ray_address:
        errors.append("psi.ray_address: only used with psi.backend = \"ray\"; set the backend or remove the address")
    return errors


def _serve_front_checks(config: PartyConfig) -> list[str]:
    """The bank's HTTP front: its limits in range, model management with a credential of its own."""
    s, errors = config.serve, []
    for key, low, high in (("max_header_kb", 1, 1024), ("max_headers", 1, 10_000), ("max_connections", 8, 1_000_000)):
        if not low <= getattr(s, key) <= high:
            errors.append(f"serve.{key}: must be between {low} and {high}, got {getattr(s, key)}")
    for key in ("header_timeout_s", "body_timeout_s"):
        if not 0 < getattr(s, key) <= 3600:
            errors.append(f"serve.{key}: must be above 0 and at most 3600 s, got {getattr(s, key)}")
    if s.manage and not s.manage_token_file:
        errors.append("serve.manage: model management needs a credential of its own; set serve.manage_token_file "
                      "to a file holding a long random token (not the scoring token_file), readable by you only")
    if s.manage_token_file and s.manage_token_file == s.token_file:
        errors.append("serve.manage_token_file: must not be serve.token_file; an app allowed to score must not be "
                      "able to switch models")
    return errors


def _serve_partner_checks(config: PartyConfig) -> list[str]:
    """The runs a partner daemon serves, and the bounds of the partners' cached-mode snapshots at the bank."""
    s, errors = config.serve, []
    errors += [problem for run in s.runs if (problem := name_problem("serve.runs", run))]
    if not 1 <= s.max_snapshot_mb <= 1 << 20:
        errors.append(f"serve.max_snapshot_mb: must be between 1 and {1 << 20} MiB, got {s.max_snapshot_mb}")
    if not 0 < s.snapshot_timeout_s <= 86400:
        errors.append(f"serve.snapshot_timeout_s: must be above 0 and at most 86400 s, got {s.snapshot_timeout_s}")
    if not 0 <= s.max_delta_removed <= 1:
        errors.append(f"serve.max_delta_removed: a share of the customers held, from 0 to 1; got "
                      f"{s.max_delta_removed}")
    return errors


def _limit_checks(config: PartyConfig) -> list[str]:
    """Bounds on what a party accepts: tensor magnitudes, who may connect, how much it logs."""
    from vsplit.transport.admission import networks

    errors = []
    train, net = config.train, config.network
    for key, value in (("train.max_abs_activation", train.max_abs_activation),
                       ("train.max_abs_gradient", train.max_abs_gradient)):
        if not 0 < value < float("inf"):
            errors.append(f"{key}: must be a positive number, got {value}")
    try:
        networks(net.allow_from)
    except ConfigError as exc:
        errors.append(str(exc))
    if not 0 < net.first_record_timeout_s <= 60:
        errors.append(f"network.first_record_timeout_s: must be above 0 and at most 60 s, got "
                      f"{net.first_record_timeout_s}")
    if not config.output.log_max_mb > 0:
        errors.append(f"output.log_max_mb: must be positive, got {config.output.log_max_mb}")
    return errors


def _compression_checks(config: PartyConfig) -> list[str]:
    from vsplit.protocol.training.compression import PLAIN, get_codec  # numpy only, no PyTorch

    net = config.network
    try:
        codec = get_codec(net.compression)
    except ConfigError as exc:
        return [f"network.compression: {exc}"]
    if net.error_feedback and codec.kind == PLAIN:
        return ["network.error_feedback: needs a lossy compression; set network.compression (e.g. \"int8\") or "
                "remove error_feedback"]
    return []


__all__ = ["apply_override", "load_config", "resolve"]
