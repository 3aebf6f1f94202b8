"""``vsplit pilot splitfed-credit``: three banks, a server and a federated server as five processes over mutual TLS.

Theory of operation. :func:`run_splitfed_pilot` deals the default-credit rows to three banks (IID by default;
``--set schedule.kind=...`` and the other ``[schedule]`` keys pick the schedule), writes every party's folder
(:func:`vsplit.pilot.horizontal.prepare_horizontal`), starts ``vsplit run`` for each party as its own process,
waits for all, and writes ``runs/<run-id>/report.json`` and ``report.md``: every party's own view (its schedule,
bytes sent and received per peer, seconds per round, clients lost) and the test metrics per bank and pooled.

The metrics are computed here, by the pilot, which can read every party's ``model.npz`` only because all five
run on this one machine: each bank's own test rows through its saved client segment and the server's saved
segment. Between organizations each bank scores its own customers with the server instead (``vsplit predict``,
:mod:`vsplit.node.horizontal`); the two give the same probabilities (``tests/test_horizontal_predict.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from vsplit import strict_json
from vsplit.atomic import write_atomic
from vsplit.models.recipe import BATCH_SIZE
from vsplit.pilot.horizontal import FEDERATED, SERVER, prepare_horizontal
from vsplit.pilot.processes import run_processes


def run_splitfed_pilot(*, root: Path | None = None, run_id: str | None = None, overrides: tuple[str, ...] = (),
                       quiet: bool = False, banks: int = 3, timeout: float = 1800.0) -> dict[str, Any]:
    """Run the pilot; return its report (also written to ``<run dir>/report.json`` and ``report.md``)."""
    from vsplit.config import load_config

    started = time.perf_counter()
    run_id = run_id or f"splitfed-credit-{time.strftime('%Y%m%d-%H%M%S')}"
    root = Path(root or Path("runs") / "pilots" / "splitfed-credit")
    schedule, overrides = _schedule_overrides(overrides)
    federated = schedule.get("kind", "splitfed_v1") in ("splitfed_v1", "splitfed_v2")
    configs = prepare_horizontal(root, banks=banks, run_id=run_id, federated=federated, schedule=schedule,
                                 train={"epochs": 20, "batch_size": 256}, output_dir=str(Path("runs").resolve()))
    loaded = {p: load_config(c, overrides=list(overrides)) for p, c in configs.items()}
    from vsplit.config import resolve

    run_dir = resolve(loaded[SERVER], loaded[SERVER].output.dir) / run_id
    run_processes(configs, overrides=overrides, timeout=timeout)
    report = _report(run_dir, loaded)
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["report"] = str(run_dir / "report.md")
    write_atomic(run_dir / "report.json", (strict_json.dumps(report, indent=2) + "\n").encode())
    write_atomic(run_dir / "report.md", render(report).encode())
    return report


def _schedule_overrides(overrides: tuple[str, ...]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``--set schedule.KEY=VALUE`` items shape the configs the pilot writes (a sequential or FedAvg run has no
    federated server, a relayed sequential run pins the other banks' certificates); the rest apply as given."""
    from vsplit.config.load import apply_override

    raw: dict[str, Any] = {}
    rest = []
    for item in overrides:
        if item.strip().startswith("schedule."):
            apply_override(raw, item)
        else:
            rest.append(item)
    return dict(raw.get("schedule", {})), tuple(rest)


def _report(run_dir: Path, configs: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from vsplit.runtime.checkpoint import load_checkpoint

    views = {p: json.loads((run_dir / p / "result.json").read_text()) for p in configs}
    server = configs[SERVER]
    saved_top = run_dir / SERVER / "model.npz"  # fedavg: the server only averaged and owns no segment
    top = load_checkpoint(saved_top, run_id=server.output.run_id, party=SERVER)["segments"] if saved_top.exists() \
        else {}
    banks: dict[str, Any] = {}
    tests: dict[str, Any] = {}
    pooled_y, pooled_p = [], []
    for party, config in configs.items():
        if party in (SERVER, FEDERATED):
            continue
        saved = load_checkpoint(run_dir / party / "model.npz", run_id=config.output.run_id, party=party)["segments"]
        node, test, y, proba = score_bank(config, server, {**saved, **top})
        by_peer = views[party]["comm"]["by_peer"]
        banks[party] = {"train_rows": len(node.party.ids), "test_rows": len(y),
                        "auc": round(float(roc_auc_score(y, proba)), 4),
                        "bytes_sent": sum(v["sent"] for v in by_peer.values()),
                        "bytes_received": sum(v["received"] for v in by_peer.values()), "by_peer": by_peer}
        tests[party] = (test, y)
        pooled_y.append(y)
        pooled_p.append(proba)
    y, p = np.concatenate(pooled_y), np.concatenate(pooled_p)
    baselines = _baselines(configs, tests)
    return {"schedule": views[SERVER]["schedule"], "rows": views[SERVER]["rows"],
            "pooled_test": {"test_rows": len(y), "auc": round(float(roc_auc_score(y, p)), 4)}, "banks": banks,
            "baselines": baselines,
            "views": {p: {k: v[k] for k in ("schedule", "seconds", "round_seconds", "lost", "readmitted", "comm")}
                      for p, v in views.items()}}


def score_bank(config: Any, server: Any, segments: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """A bank's test rows (``config``'s ``data.test_path``, through its own preprocessing) scored by ``segments``
    (saved states by segment name: a client segment and the server's, ``server`` the server's config); the bank's
    node, its test table, the labels and the probabilities."""
    from vsplit.config import resolve
    from vsplit.data.sources import read_table
    from vsplit.node.horizontal import HorizontalNode

    node = HorizontalNode(config, progress=False)
    modules = dict(node.modules)
    for name, state in segments.items():
        if name not in modules:
            modules[name] = HorizontalNode(server, progress=False).modules[name]
        modules[name].load_state_dict({k: _tensor(v) for k, v in state.items()})
    d = config.data
    test = read_table(resolve(config, d.test_path), id_column=d.id_column, features=d.features, label=d.label)
    assert node.party is not None
    _, inputs = node.party.prepare(test.drop(columns=[d.label]))
    proba = _score(node, modules, inputs)
    y = node.task.encode_with(test[d.label], node.party.label_info).numpy()
    return node, test, y, proba


def _baselines(configs: dict[str, Any], tests: dict[str, Any]) -> dict[str, Any]:
    """What the banks would get without the split: each alone on its own rows, and the same network trained on
    every bank's rows pooled in one place (possible only here), both scored on the pooled test rows."""
    import numpy as np
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    from vsplit.data.sources import read_table

    banks = [p for p in configs if p not in (SERVER, FEDERATED)]
    tables = {}
    for bank in banks:
        d = configs[bank].data
        from vsplit.config import resolve

        tables[bank] = read_table(resolve(configs[bank], d.path), id_column=d.id_column, features=d.features,
                                  label=d.label)
    pooled_test = pd.concat([tests[b][0] for b in banks], ignore_index=True)
    y = np.concatenate([tests[b][1] for b in banks])
    config = configs[banks[0]]
    out: dict[str, Any] = {}
    alone = {b: float(roc_auc_score(y, _train_in_one_place(config, tables[b], pooled_test))) for b in banks}
    best = max(alone, key=alone.__getitem__)
    out["best_bank_alone"] = {"bank": best, "auc": round(alone[best], 4), "each": {b: round(a, 4)
                                                                                  for b, a in alone.items()}}
    pooled = pd.concat(list(tables.values()), ignore_index=True)
    out["pooled"] = {"auc": round(float(roc_auc_score(y, _train_in_one_place(config, pooled, pooled_test))), 4)}
    return out


def _train_in_one_place(config: Any, table: Any, test: Any) -> Any:
    """The split's network (same segments, optimizer, epochs, batches) trained on ``table`` in one process."""
    import torch

    from vsplit.node.horizontal import HorizontalNode
    from vsplit.party import LabelParty

    node = HorizontalNode(config, progress=False)  # its settings and segment builders
    d, t = config.data, config.train
    assert node.party is not None  # the split's initial client segment: the clients' shared init seed
    party = LabelParty(node.h.client, table, label=d.label, id_column=d.id_column, positive_label=d.positive_label,
                       settings=node.model_settings(), seed=t.seed, init_seed=node.party.init_seed, task=node.task)
    topology = node.h.base.placed_on(node.h.client)
    modules = party.modules_for(topology)
    order = [s.name for s in topology.segments]
    params = [p for m in modules.values() for p in m.parameters()]
    optimizer = party.optimizer(params)
    inputs, labels = party.inputs, party.labels
    assert inputs is not None
    g = torch.Generator().manual_seed(t.seed)
    for module in modules.values():
        module.train()
    for _ in range(t.epochs):
        for idx in torch.randperm(len(labels), generator=g).split(t.batch_size or BATCH_SIZE):
            optimizer.zero_grad()
            x = modules[order[0]](*(tensor[idx] for tensor in inputs))
            for name in order[1:]:
                x = modules[name](x)
            node.task.loss(x, labels[idx]).backward()
            optimizer.step()
    _, test_inputs = party.prepare(test.drop(columns=[d.label]))
    return _score(node, modules, test_inputs)


def _score(node: Any, modules: dict[str, Any], inputs: Any) -> Any:
    import torch

    source = next(s.name for s in node.h.base.sources_of(node.h.client))
    order = [s.name for s in node.h.base.segments]
    with torch.no_grad():
        x = modules[source](*inputs)
        for name in order:
            if name != source:
                modules[name].eval()
                x = modules[name](x)
        return torch.sigmoid(x.squeeze(-1)).numpy()


def _tensor(value: Any) -> Any:
    import torch

    return torch.as_tensor(value)


def render(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines = [f"# splitfed-credit: {report['schedule']}", "",
             "Test AUC of the split model on each bank's own test rows and on all of them (pooled); bytes each bank",
             "sent and received over the whole run.", "",
             "| bank | train rows | test rows | test AUC | bytes sent | bytes received |", "|---|---|---|---|---|---|"]
    for bank, m in report["banks"].items():
        lines.append(f"| {bank} | {m['train_rows']} | {m['test_rows']} | {m['auc']:.4f} | {m['bytes_sent']:,} | "
                     f"{m['bytes_received']:,} |")
    pooled, base = report["pooled_test"], report["baselines"]
    lines += [f"| all banks' test rows | | {pooled['test_rows']} | {pooled['auc']:.4f} | | |", "",
              "Without the split, on the same pooled test rows: the best bank alone "
              f"({base['best_bank_alone']['bank']}) {base['best_bank_alone']['auc']:.4f}; the same network trained on "
              f"every bank's rows pooled in one place {base['pooled']['auc']:.4f}.", "",
              f"Seconds per round (server): {report['views'][SERVER]['round_seconds']}", "",
              f"Clients lost: {report['views'][SERVER]['lost'] or 'none'}; readmitted (from round): "
              f"{report['views'][SERVER].get('readmitted') or 'none'}", "",
              f"Whole pilot: {report['seconds']} s (five processes over mutual TLS on this machine)", ""]
    return "\n".join(lines)
