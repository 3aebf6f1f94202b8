"""A bag of split networks in the pilot form (``[train] networks``): each organization's own process trains the
networks one after another over mutual TLS, and the bag equals :class:`vsplit.bagging.SplitBag` in one process.

The process test runs a bank and two partners (the three-way partition of the bundled bank sample,
tests/_three_party_support.py) on the plain small network for two epochs, with ``networks = 2``: ``vsplit train`` as
three processes, then ``vsplit predict``'s code, whose probabilities must be the mean of the two networks' as
SplitBag computes it. The other
tests run the same node code in one process over memory channels (what crosses the cut; disagreeing configs) or only
load configs (bad values).
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pandas as pd
import pytest
import torch
from _leaks import leaks
from _pilot_support import free_port, start, wait_all
from _plain import PLAIN_SET
from _three_party_support import COLUMNS, PARTNERS, prepare_three_parties

from vsplit.bagging import SplitBag
from vsplit.config import load_config
from vsplit.errors import CheckpointError, ConfigError, ProtocolError, RemoteAbort
from vsplit.models.recipe import PLAIN
from vsplit.protocol.training.messages import Activations, EpochEnd, Gradients, Ready, TrainingPlan
from vsplit.runtime.checkpoint import load_checkpoint
from vsplit.transport.memory import memory_pair

EPOCHS = 2
BAG = f"[train]\nepochs = {EPOCHS}\nnetworks = 2\n"


def _sets(*more: str) -> list[str]:
    return [x for item in (*PLAIN_SET, *more) for x in ("--set", item)]


def _launch(root, configs, command: list[str], tag: str, extra: dict[str, list[str]]) -> None:
    logs = {p: root / f"{p}-{tag}.log" for p in configs}
    procs = {p: start([*command, "--config", str(c), "--quiet", *extra.get(p, [])], log=logs[p])
             for p, c in configs.items()}
    wait_all(procs, logs, timeout=120)


def _shrink(root, *, rows: dict[str, int]) -> None:
    """Keep each split's first ``rows[split]`` bank customers (and the partners' rows of them): a fast test."""
    for split, n in rows.items():
        keep = set(pd.read_parquet(root / "bank" / "data" / f"{split}.parquet")["customer_id"].head(n))
        for party in COLUMNS:
            path = root / party / "data" / f"{split}.parquet"
            table = pd.read_parquet(path)
            table[table["customer_id"].isin(keep)].reset_index(drop=True).to_parquet(path, index=False)


def _views(root, split: str) -> dict[str, pd.DataFrame]:
    return {p: pd.read_parquet(root / p / "data" / f"{split}.parquet") for p in COLUMNS}


def _split_bag(root, networks: int, **params) -> SplitBag:
    """SplitBag in this process on the same tables and seeds, with one torch thread as the party processes."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return SplitBag(networks=networks, label_party="bank", label="y", positive_label="yes", random_state=0,
                        **{**PLAIN, "epochs": EPOCHS, **params}).fit(_views(root, "train"))
    finally:
        torch.set_num_threads(threads)


def test_three_processes_train_a_bag_whose_predictions_equal_split_bag_in_one_process(tmp_path):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="bag", extra=BAG)
    _shrink(tmp_path, rows={"train": 1500, "test": 500})
    # no test table in training (its scoring is predict's, below): no report plots to draw; the recipe's numeric
    # embedding ("auto"): the bag's two networks embed numbers piecewise-linearly and periodically
    _launch(tmp_path, configs, ["train"], "train",
            dict.fromkeys(configs, _sets('data.test_path=""', 'model.numeric_embedding="auto"')))
    run = tmp_path / "runs" / "bag"
    for party in COLUMNS:  # one model file per party, holding both networks' own parts (and nothing of a peer's)
        state = load_checkpoint(run / party / "model.npz", run_id="bag", party=party)
        assert state["networks"] == 2 and len(state["bag"]) == 1 and state["bag"][0]["seed"] == 1000
        assert (state["numeric_embedding"], state["bag"][0]["numeric_embedding"]) == ("piecewise", "periodic")
        own = {party, "top"} if party == "bank" else {party}
        assert set(state["segments"]) == set(state["bag"][0]["segments"]) == own
        assert not list((run / party / "checkpoints").glob("*.npz"))  # a bag keeps no epoch checkpoints

    # vsplit predict's code (PartyNode.predict) in threads over memory channels: a second set of processes would
    # only start the same code again
    from _serving_support import batch_predict

    predictions = batch_predict(tmp_path, "bag")
    scored = predictions[predictions["status"] == "scored"].set_index("customer_id")["probability"]
    assert len(scored) > 200

    bag = _split_bag(tmp_path, networks=2, numeric_embedding="auto")
    assert [clf.numeric_embedding for clf in bag.estimators_] == ["piecewise", "periodic"]
    test = _views(tmp_path, "test")
    with pytest.warns(UserWarning, match="unknown to a partner"):
        expected = pd.Series(bag.predict_proba(test)[:, 1], index=test["bank"]["customer_id"].astype(str))
    with pytest.warns(UserWarning, match="unknown to a partner"):
        first = pd.Series(bag.estimators_[0].predict_proba(test)[:, 1], index=expected.index)
    np.testing.assert_allclose(scored.to_numpy(), expected[scored.index].to_numpy(), atol=1e-5)
    # and the bag is not its first network: the mean really averaged two different networks
    assert np.abs(scored.to_numpy() - first[scored.index].to_numpy()).max() > 1e-3

    report = (run / "bank" / "result.json").read_text()
    assert '"seed": 1000' in report  # result.json lists each network's seed, chosen epoch and epochs run
    assert f"a bag of 2 networks, epochs run {EPOCHS}, {EPOCHS};" in (tmp_path / "bank-train.log").read_text()


# -- the same node code in one process, over memory channels ---------------------------------------------------------
IN_PROCESS = "[train]\nepochs = 3\nbatch_size = 64\npatience = 100\n"
#: what a partner may send: the PSI exchange, then in training and scoring only its Ready and embeddings
PARTNER_SENDS = {"Hello", "Blinded", "Doubled", "Ready", "Activations"}


def _nodes(root, run_id: str, sets: dict[str, list[str]], *, test: bool = False) -> dict:
    from vsplit.node import PartyNode

    common = [*PLAIN_SET, f"output.run_id={run_id}", *([] if test else ['data.test_path=""'])]
    return {p: PartyNode(load_config(root / p / "party.toml", overrides=[*common, *sets.get(p, [])]), progress=False)
            for p in COLUMNS}


def _run_all(nodes: dict) -> tuple[dict, dict]:
    """Every node's training run in its own thread over memory channels: results and errors by party."""
    from _serving_support import _channels, in_threads_with_errors

    channels = _channels()
    return in_threads_with_errors({p: (lambda p=p: nodes[p].run(channels[p])) for p in nodes}, timeout=120)


@pytest.fixture(scope="module")
def bag_run(tmp_path_factory) -> dict:
    """A bag of two networks trained by the three nodes in one process, every frame they send tapped."""
    import vsplit.node.node as node_module
    from vsplit.runtime.pump import Pump

    root = tmp_path_factory.mktemp("bag")
    prepare_three_parties(root, port=free_port(), run_id="bag", extra=IN_PROCESS)
    _shrink(root, rows={"train": 1200, "test": 400})
    frames: list[tuple[str, str, object, bytes]] = []

    def tapped(*args, **kwargs):
        return Pump(*args, taps=[lambda s, r, m, f: frames.append((s, r, m, bytes(f)))], **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(node_module, "Pump", tapped)
        # the recipe's numeric embedding ("auto"): the two networks' bottoms differ (piecewise-linear, periodic)
        sets = {p: ["train.networks=2", 'model.numeric_embedding="auto"'] for p in COLUMNS}
        results, errors = _run_all(_nodes(root, "bag", sets, test=True))
    assert not errors, errors
    return {"root": root, "frames": frames, "results": results}


def test_partners_of_a_bag_send_only_their_ready_and_embeddings_never_raw_values_or_ids(bag_run):
    frames, root = bag_run["frames"], bag_run["root"]
    tables = {p: pd.read_parquet(root / p / "data" / "train.parquet") for p in COLUMNS}
    ids = [str(v).encode() for v in tables["bank"]["customer_id"]]
    for partner in PARTNERS:
        sent = [(m, f) for s, _, m, f in frames if s == partner]
        assert {type(m).__name__ for m, _ in sent} <= PARTNER_SENDS
        readies = [m for m, _ in sent if isinstance(m, Ready)]
        # one machine per network: training, then scoring the test table
        assert [(r.network, r.networks) for r in readies] == [(0, 2), (1, 2)] * 2
        numbers = tables[partner].select_dtypes("number")
        values = numbers[numbers.nunique().idxmax()].to_numpy()  # its most distinctive numeric column
        values = np.unique(values[np.abs(values) > 100])[:40]  # (a 0 or 1 is in any frame's bytes)
        assert len(values) >= 10
        for message, frame in sent:
            assert not any(marker in frame for marker in ids[::25]), f"{partner} sent a customer ID"
            assert not leaks(message, frame, values), f"{partner} sent a raw feature value"
    # the bank sends each network's plan, gradients and epoch ends; twice the single network's training traffic
    bank = {type(m) for s, _, m, _ in frames if s == "bank"}
    assert {TrainingPlan, Gradients, EpochEnd} <= bank
    plans = [m for s, r, m, _ in frames if s == "bank" and r == "shop" and isinstance(m, TrainingPlan)
             and not m.predict]
    assert len(plans) == 2 and plans[0].seed != plans[1].seed  # each network its own batch schedule
    activations = [m for s, _, m, _ in frames if s == "shop" and isinstance(m, Activations)]
    assert len({(a.epoch, a.step, a.phase) for a in activations}) * 2 == len(activations)


def test_a_bag_scores_its_test_table_in_training_and_its_model_card_says_so(bag_run):
    result, folder = bag_run["results"]["bank"], bag_run["root"] / "runs" / "bag" / "bank"
    assert 0.5 < result.test["auc"] <= 1 and result.test["n_scored"] > 150
    assert [(n["network"], n["seed"]) for n in result.networks] == [(0, 0), (1, 1000)]
    card = (folder / "model_card.md").read_text()
    assert "A bag of 2 networks" in card and "networks" in card
    # the bank's own bottoms' numeric embedding, one per network, "auto" resolved
    recipe = json.loads((folder / "model_card.json").read_text())["recipe"]
    assert recipe["numeric_embedding"] == "['piecewise', 'periodic']"


def test_a_bag_predicts_and_serves_the_mean_of_its_networks(bag_run):
    from _serving_support import batch_predict

    from vsplit.serve.model import BankModel, PartnerModel

    root = bag_run["root"]
    batch = batch_predict(root, "bag")
    scored = batch[batch["model"] == "split"].set_index("customer_id")
    assert len(scored) > 150
    bank = BankModel.load(load_config(root / "bank" / "party.toml"), run_id="bag")
    assert len(bank.more) == 1 and bank.fast is not None and bank.more[0][2] is not None  # the numpy fast path
    test = pd.read_parquet(root / "bank" / "data" / "test.parquet")
    test["customer_id"] = test["customer_id"].astype(str)
    test = test[test["customer_id"].isin(scored.index)].reset_index(drop=True)
    embeddings = {}
    for partner in PARTNERS:
        model = PartnerModel.load(load_config(root / partner / "party.toml"), run_id="bag")
        assert model.width == 2 * bank.node.config.model.embedding_width  # both networks' embeddings, side by side
        ids, values = model.embed(pd.read_parquet(root / partner / "data" / "test.parquet"))
        embeddings[partner] = values[pd.Index(ids).get_indexer(test["customer_id"])]
    rows = test[list(bank.columns)].to_dict("records")
    served = bank.score(rows, embeddings)
    np.testing.assert_allclose(served, scored.loc[test["customer_id"], "probability"].to_numpy(), atol=1e-6)
    first = bank._network(bank.node.party, bank.modules, bank.fast, rows,
                          {bank.partners[p][0]: v[:, :v.shape[1] // 2] for p, v in embeddings.items()})
    assert np.abs(served - first).max() > 1e-3  # the mean is not the first network alone
    # a partner holding another number of networks does not pair with this bank: the pair digests differ
    from vsplit.serve.model import bag_digest

    view = bank.node.topology.view_fingerprint("shop")
    assert bank.partners["shop"][2] == bag_digest("bag", view, 2) != bag_digest("bag", view, 1)


def test_parties_configured_with_other_bag_sizes_refuse_each_other_naming_both(tmp_path):
    prepare_three_parties(tmp_path, port=free_port(), run_id="mixed", extra=IN_PROCESS)
    _shrink(tmp_path, rows={"train": 600, "test": 100})
    sets = {"bank": ["train.networks=2"], "shop": ["train.networks=3"], "telco": ["train.networks=2"]}
    _, errors = _run_all(_nodes(tmp_path, "mixed", sets))
    assert isinstance(errors.get("bank"), ProtocolError), errors
    message = str(errors["bank"])
    assert "'shop'" in message and "train.networks = 3" in message and "train.networks = 2" in message
    assert isinstance(errors.get("shop"), RemoteAbort) and "settings disagree" in str(errors["shop"])
    assert not (tmp_path / "runs" / "mixed" / "bank" / "model.npz").exists()


@pytest.mark.parametrize(("value", "expected"), [
    ("0", "train.networks: must be at least 1"), ("-2", "train.networks: must be at least 1"),
    ('"two"', "train.networks"), ("2.5", "train.networks"),
])
def test_a_bad_network_count_is_refused_naming_the_key(tmp_path, value, expected):
    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="bad")
    with pytest.raises(ConfigError, match=expected):
        load_config(configs["bank"], overrides=[f"train.networks={value}"])


def test_resuming_a_bag_is_refused_before_any_peer_is_reached(tmp_path):
    from vsplit.node import PartyNode

    configs = prepare_three_parties(tmp_path, port=free_port(), run_id="again")
    node = PartyNode(load_config(configs["bank"], overrides=["train.networks=3"]), resume=True, progress=False)
    with pytest.raises(CheckpointError, match=r"--resume does not resume a bag .*train.networks = 3.*without --resume"):
        node.run(channels={})


def test_explain_refuses_a_bag_naming_the_limitation_and_monitor_says_which_network_it_shows(bag_run):
    from vsplit.explain.process import explain_party
    from vsplit.monitor.process import monitor_party

    root = bag_run["root"]
    config = load_config(root / "bank" / "party.toml", overrides=["output.run_id=bag"])
    with pytest.raises(ConfigError, match=r"bag of 2 networks .*explain a run trained with train.networks = 1"):
        explain_party(config, root / "bank" / "data" / "test.parquet", channels={})
    _, folder = monitor_party(config, root / "bank" / "data" / "test.parquet", job="bag")
    assert "embedding dimensions are the first network's" in (folder / "stability.json").read_text()


def test_a_u_shaped_bag_trains_saves_and_scores_every_network_at_the_bank_and_the_server(tmp_path):
    """The server of a U-shaped split (a compute party: no rows) trains, keeps and scores each network's middle."""
    from _pilot_support import small, write_configs

    from vsplit.datasets import preset
    from vsplit.node import PartyNode
    from vsplit.pilot.orchestrate import pilot_data
    from vsplit.pilot.prepare import export_tables

    tables = pilot_data(small(preset("secretflow_bank", seed=0), 600, 200), "u_shaped")
    roles = {"bank": "label", "cloud": "compute"}
    export_tables(tables, tmp_path)
    configs = write_configs(tmp_path, port=free_port(), run_id="u-bag", kind="u_shaped", roles=roles,
                            extra="[train]\nepochs = 1\nnetworks = 2\n")
    nodes = {p: PartyNode(load_config(c, overrides=list(PLAIN_SET), check_files=False), progress=False)
             for p, c in configs.items()}
    bank_end, cloud_end = memory_pair()
    done: dict = {}
    worker = threading.Thread(target=lambda: done.update(cloud=nodes["cloud"].run({"bank": cloud_end})))
    worker.start()
    result = nodes["bank"].run({"cloud": bank_end})
    worker.join(timeout=60)
    assert "cloud" in done and [n["seed"] for n in result.networks] == [0, 1000]
    assert result.test["n_scored"] == 200 and 0 < result.test["auc"] < 1  # the test table, scored by the bag
    run = tmp_path / "runs" / "u-bag"
    for party in roles:
        state = load_checkpoint(run / party / "model.npz", run_id="u-bag", party=party)
        assert state["networks"] == 2 and set(state["bag"][0]["segments"]) == set(state["segments"])
    assert set(load_checkpoint(run / "cloud" / "model.npz", run_id="u-bag", party="cloud")["segments"]) == {"middle"}


def test_ready_names_its_network_of_the_bag_and_refuses_one_outside_it():
    from vsplit.transport import codec

    ready = Ready(resume_epoch=-1, topology="view", network=1, networks=3)
    assert codec.decode(codec.encode(ready, session=b"s" * 16, seq=0))[1] == ready
    for network, networks in ((3, 3), (-1, 2), (0, 0)):
        with pytest.raises(ProtocolError, match="network must be 0 to networks - 1"):
            Ready(resume_epoch=-1, topology="view", network=network, networks=networks)


def test_a_model_file_whose_bag_does_not_add_up_is_refused_naming_the_file(bag_run):
    from vsplit.errors import UnreadableCheckpoint
    from vsplit.node import PartyNode
    from vsplit.runtime.checkpoint import save_checkpoint

    path = bag_run["root"] / "runs" / "bag" / "shop" / "model.npz"
    original = path.read_bytes()
    config = load_config(bag_run["root"] / "shop" / "party.toml", overrides=["output.run_id=bag"])
    try:
        for damage in ({"networks": 3}, {"bag": [{"seed": 1000}]}):
            state = load_checkpoint(path, run_id="bag", party="shop")
            save_checkpoint(path, {**state, **damage}, run_id="bag", party="shop")
            with pytest.raises(UnreadableCheckpoint, match=r"model\.npz does not hold what this party.s model needs"):
                PartyNode(config, progress=False).load_model()
            path.write_bytes(original)
    finally:
        path.write_bytes(original)
