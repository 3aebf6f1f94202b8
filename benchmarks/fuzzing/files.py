"""Fuzz targets of files a party reads back from its own run folder: the saved model (``model.npz``, as ``vsplit
predict`` and ``vsplit serve`` load it), the model card's record (``model_card.json``, which ``vsplit explain``
adds to), the scoring service's bearer-token file, and a pair's PSI progress (``state.json``, ``layout-*.npy``).

Damage on disk (a full disk, a crash of another tool, a hand edit) must give an error naming the file, never a
traceback. The archive around a model is fuzzed by ``checkpoint_file``; here the model's *contents* are: the input is
the JSON tree of a real party's ``model.npz`` (its settings, preprocessing and the names of its tensors), repacked with
that model's own arrays, so the fuzzer reaches past the archive checks to the loading of the party's model.

Example:
    >>> run_token(b"a-long-random-token-of-32-chars!\\n")
    >>> run_token(b"short")
    Traceback (most recent call last):
    ...
    vsplit.errors.ConfigError: serve.token_file: the token in ... is shorter than 16 characters; ...
"""

from __future__ import annotations

import io
import json
import random
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

_HOLDER: list[tempfile.TemporaryDirectory] = []
_STATE: dict[str, Any] = {}


def _folder() -> Path:
    if not _HOLDER:
        _HOLDER.append(tempfile.TemporaryDirectory(prefix="vsplit-fuzz-files-"))  # removed when the process ends
    return Path(_HOLDER[0].name)


# -- model.npz -------------------------------------------------------------------------------------------------------
_CONFIG = """[party]
name = "bank"
role = "label"
[data]
path = "train.csv"
id_column = "customer_id"
label = "y"
positive_label = "yes"
[model]
numeric_embedding = "{numeric}"
[network]
listen = "127.0.0.1:7700"
key = "bank.key"
cert = "bank.pem"
peers = {{ shop = "shop.pem" }}
[output]
dir = "runs"
run_id = "fuzz"
"""


def _node(numeric: str = "piecewise") -> Any:
    """A label party of a small table (ages, jobs, balances), built once per process; its ``model.npz`` is what it
    saved untrained (the same format and contents a trained one has)."""
    if numeric not in _STATE:
        from vsplit.config.load import load_config
        from vsplit.node import PartyNode

        folder = _folder() / f"model-{numeric}"
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(0)
        rows = ["customer_id,age,job,balance,y"] + [
            f"C-{i},{rng.randint(20, 70)},{rng.choice(['admin.', 'technician', 'services'])},"
            f"{rng.uniform(-100, 900):.1f},{rng.choice(['yes', 'no'])}" for i in range(60)]
        (folder / "train.csv").write_text("\n".join(rows) + "\n")
        (folder / "party.toml").write_text(_CONFIG.format(numeric=numeric))
        node = PartyNode(load_config(folder / "party.toml", check_files=False), progress=False)
        path = node.save_model()
        with np.load(path, allow_pickle=False) as saved:
            arrays = {k: saved[k] for k in saved.files}
        _STATE[numeric] = (node, path, arrays)
    return _STATE[numeric]


def _pack(meta: bytes, arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **{**arrays, "__meta__": np.frombuffer(meta, dtype=np.uint8)})
    return buffer.getvalue()


def run_model(data: bytes) -> None:
    """``data`` as the JSON tree of the label party's ``model.npz`` (its arrays kept), loaded as ``vsplit predict``
    loads it, then the party's first rows prepared and scored with it."""
    import torch

    node, path, arrays = _node()
    path.write_bytes(_pack(data, {k: v for k, v in arrays.items() if k != "__meta__"}))
    node.load_model()
    _, inputs = node.party.prepare(node.table.head(5))
    segments = node._segments()
    with torch.inference_mode():
        own = segments["bank"](*inputs)
        segments["top"]({"bank": own, "shop": torch.zeros(len(own), 16)})


def model_seeds() -> list[bytes]:
    return [_node(numeric)[2]["__meta__"].tobytes() for numeric in ("piecewise", "none")]


# -- model_card.json -------------------------------------------------------------------------------------------------
def run_card(data: bytes) -> None:
    """A ``model_card.json`` read back as ``vsplit explain`` reads it, importances added, and rendered to Markdown."""
    from vsplit.report.card import card_markdown
    from vsplit.report.card_record import read_card

    path = _folder() / "model_card.json"
    path.write_bytes(data)
    card = read_card(path)
    card["importance"] = {"age": 0.5, "shop": 0.25}
    card.setdefault("limits", []).append("fuzzed")
    card_markdown(card, pictures={"importance": "card_importance.png", "reliability": "card_reliability.png"})


def card_seeds() -> list[bytes]:
    card = {
        "title": "bank-marketing pilot", "data": {"rows": {"bank": 100, "shop": 90}, "intersection": 80,
                                                   "test_rows": 20, "date_range": "2026-01 to 2026-06"},
        "topology": {"kind": "vertical", "segments": ["bank: bottom", "bank: top"], "cuts": ["shop -> bank, 16"]},
        "recipe": {"epochs": 20, "lr": 0.001, "bottom_hidden": [128]},
        "metrics": {"auc": 0.93, "auc_interval": [0.92, 0.94], "level": 0.95, "draws": 200, "rows": 20,
                    "brier": 0.06, "ece": 0.01, "curve": {"mean_predicted": [0.1, 0.5], "observed_rate": [0.12, 0.4]}},
        "importance": {"age": 0.3}, "fairness": {"column": "age_band", "slices": [
            {"slice": "<30", "rows": 10, "auc": 0.9, "approval_rate": 0.2}]},
        "privacy": {"defenses": ["max_norm"], "leakage": {"norm_leak_auc": 0.6}, "notes": ["measured"]},
        "limits": ["a limit"],
    }
    return [json.dumps(card).encode(), json.dumps({"title": "bare"}).encode()]


# -- the scoring service's bearer-token file -------------------------------------------------------------------------
def run_token(data: bytes) -> None:
    """``serve.token_file`` read as ``vsplit serve`` reads it at start."""
    from vsplit.serve.run import bearer_token

    path = _folder() / "token.txt"
    path.write_bytes(data)
    path.chmod(0o600)  # a token file others may read is refused before it is parsed
    bearer_token(SimpleNamespace(serve=SimpleNamespace(token_file=str(path)), source=str(path)))


def token_seeds() -> list[bytes]:
    return [b"q3Zs0c1Yq8c5hA2fL0nJ9w4Rr7tUe6Xk\n", b"\n  token-with-padding-0123456789  \nsecond line\n"]


# -- a pair's PSI progress -------------------------------------------------------------------------------------------
def _psi_config() -> Any:
    from vsplit.psi.config import PsiConfig

    return PsiConfig(buckets=2)


def run_psi_state(data: bytes) -> None:
    """A pair's ``state.json`` (written under this run's settings, so it is taken), then what a rerun reads of it."""
    from vsplit.psi.resume import META, PairState

    folder = _folder() / "psi-state"
    folder.mkdir(exist_ok=True)
    (folder / META).write_bytes(data)
    state = PairState(folder, role="label", peer="shop", config=_psi_config())
    if state.tag:
        assert len(state.salt) == 32 and 0 <= state.done <= 2 and state.peer_total >= 0  # checked on reading
        for bucket in range(state.done):
            if (folder / f"layout-{bucket:04d}.npy").is_file():
                state.layout(bucket)


def psi_state_seeds() -> list[bytes]:
    from vsplit.psi.resume import META, PairState

    with tempfile.TemporaryDirectory() as folder:
        state = PairState(folder, role="label", peer="shop", config=_psi_config())
        state.begin(salt=bytes(range(32)), digest="d" * 64, size=4, keep=0)
        first = (Path(folder) / META).read_bytes()
        state.save_layout(0, np.array([2, -1, 0, 1]))
        state.finish(0, peer_total=8, matches=None)
        second = (Path(folder) / META).read_bytes()
    return [first, second]


def run_psi_layout(data: bytes) -> None:
    """A finished bucket's ``layout-0000.npy``, read back when a rerun restores the bucket."""
    from vsplit.psi.resume import PairState

    folder = _folder() / "psi-layout"
    if not (folder / "state.json").is_file():
        state = PairState(folder, role="label", peer="shop", config=_psi_config())
        state.begin(salt=bytes(range(32)), digest="d" * 64, size=4, keep=0)
        state.finish(0, peer_total=8, matches=None)
    (folder / "layout-0000.npy").write_bytes(data)
    PairState(folder, role="label", peer="shop", config=_psi_config()).layout(0)


def psi_layout_seeds() -> list[bytes]:
    buffer = io.BytesIO()
    np.save(buffer, np.array([2, -1, 0, 1], np.int64), allow_pickle=False)
    return [buffer.getvalue()]


__all__ = ["card_seeds", "model_seeds", "psi_layout_seeds", "psi_state_seeds", "run_card", "run_model",
           "run_psi_layout", "run_psi_state", "run_token", "token_seeds"]
