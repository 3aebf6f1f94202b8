"""A category training never saw is flagged wherever a score is given: the estimator warns naming the party and the
column, ``vsplit predict`` writes it in predictions.csv (``unseen_categories``; a partner in its own job's
``unseen.csv``, the bank not told), and ``vsplit serve`` answers it in a
``warnings`` entry naming the field. The row is still scored (as the unknown category)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from _serving_support import batch_predict, train_run

from vsplit.config import load_config
from vsplit.data.unseen import UnseenCategoryWarning, unseen_in_rows, unseen_in_table

NEW_JOB = "astronaut"
NEW_MONTH = "smarch"


def _views(n: int = 200) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    ids = [str(i) for i in range(n)]
    x = rng.normal(size=n)
    bank = pd.DataFrame({"customer_id": ids, "job": rng.choice(["clerk", "nurse"], n), "y": (x > 0).astype(int)})
    shop = pd.DataFrame({"customer_id": ids, "x": x, "tier": rng.choice(["gold", "basic"], n)})
    return {"bank": bank, "shop": shop}


def test_estimator_warns_naming_the_party_and_column_of_an_unseen_category_and_still_scores():
    from vsplit import SplitClassifier

    views = _views()
    clf = SplitClassifier(candidates="network", epochs=1, random_state=0).fit(views)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnseenCategoryWarning)
        seen = clf.predict_proba(views)  # every category seen in training: no warning
    new = {k: v.copy() for k, v in views.items()}
    new["bank"].loc[[3, 7], "job"] = NEW_JOB
    new["shop"].loc[[5], "tier"] = "platinum"
    with pytest.warns(UnseenCategoryWarning) as caught:
        proba = clf.predict_proba(new)
    texts = [str(w.message) for w in caught]
    assert any(t.startswith("bank: 2 of 200 rows") and "'job'" in t for t in texts), texts
    assert any(t.startswith("shop: 1 of 200 rows") and "'tier'" in t for t in texts), texts
    assert np.isfinite(proba).all() and np.array_equal(proba[[0, 1, 2]], seen[[0, 1, 2]])  # the others unchanged
    flags = unseen_in_table(clf.label_party_.preprocessor, new["bank"])
    assert [i for i, f in enumerate(flags) if f] == [3, 7] and flags[3] == ["job"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("unseen")
    train_run(root, "v1", seed=0)
    path = root / "bank" / "data" / "test.parquet"
    test = pd.read_parquet(path)
    test.loc[test.index[:3], "job"] = NEW_JOB
    test.to_parquet(path, index=False)
    test["customer_id"] = test["customer_id"].astype(str)
    telco_path = root / "telco" / "data" / "test.parquet"
    telco = pd.read_parquet(telco_path)
    shop = pd.read_parquet(root / "shop" / "data" / "test.parquet")["customer_id"].astype(str)
    shared = telco["customer_id"].astype(str).isin(set(test["customer_id"]) & set(shop))
    telco.loc[telco.index[shared][:2], "month"] = NEW_MONTH  # a partner's column: two customers all parties know
    telco.to_parquet(telco_path, index=False)
    telco_flagged = set(telco.loc[telco.index[shared][:2], "customer_id"].astype(str))
    return {"root": root, "test": test, "batch": batch_predict(root, "v1"), "telco_flagged": telco_flagged}


def test_predictions_file_names_the_column_holding_an_unseen_category(run):
    batch, test = run["batch"], run["test"]
    flagged = set(test["customer_id"].head(3))
    by_id = batch.set_index("customer_id")
    assert (by_id.loc[sorted(flagged), "unseen_categories"] == "job").all()
    others = by_id.drop(index=sorted(flagged))["unseen_categories"].fillna("")
    assert (others == "").all()
    assert by_id.loc[sorted(flagged), "probability"].notna().any()  # still scored, flagged


def test_a_partner_flags_its_own_unseen_categories_in_its_own_job_and_the_bank_is_not_told(run):
    import json

    jobs = sorted((run["root"] / "runs" / "v1" / "telco" / "predictions").glob("*/predict.json"))
    assert jobs, "telco wrote no prediction job"
    summary = json.loads(jobs[-1].read_text())
    assert summary["unseen_categories"] == {"rows": 2, "columns": {"month": 2}, "file": "unseen.csv"}
    flagged = pd.read_csv(jobs[-1].parent / "unseen.csv", dtype={"customer_id": str})
    assert set(flagged["customer_id"]) == run["telco_flagged"] and (flagged["unseen_categories"] == "month").all()
    bank = run["batch"].set_index("customer_id").loc[sorted(run["telco_flagged"]), "unseen_categories"].fillna("")
    assert not bank.str.contains("month").any()  # the bank's file names its own columns only
    assert (run["root"] / "runs" / "v1" / "shop" / "predictions").is_dir()
    assert not list((run["root"] / "runs" / "v1" / "shop" / "predictions").glob("*/unseen.csv"))


def test_serving_answer_warns_naming_the_field_of_an_unseen_category(run):
    from vsplit.serve.scorer import Batch, Row, Scorer

    root, test = run["root"], run["test"]
    config = load_config(root / "bank" / "party.toml", overrides=["serve.mode=cached", "serve.k_anonymity=1"])
    scorer = Scorer(config)
    columns = list(scorer.model.columns)
    rows = [Row(id=str(r["customer_id"]), features={c: r[c].item() if hasattr(r[c], "item") else r[c]
                                                    for c in columns})
            for r in test.head(5).to_dict("records")]
    assert scorer.model.unseen([r.features for r in rows]) == unseen_in_rows(
        scorer.model.node.party.preprocessor, [r.features for r in rows]) == [["job"]] * 3 + [[]] * 2
    n = len(rows)
    answers = {p: (np.ones(n, dtype=bool), np.zeros((n, width), dtype=np.float32))
               for p, (_, width, _) in scorer.model.partners.items()}
    batch = Batch(version=scorer.model, rows=rows, ids=[r.id for r in rows], positions=np.arange(n), asked=n,
                  answers=answers)
    answered = [s.as_dict() for s in scorer.finish(batch)]
    assert [a.get("warnings") for a in answered[3:]] == [None, None]
    for a in answered[:3]:
        assert a["score"] is not None and a["model"] == "split"
        assert a["warnings"] == [{"code": "unseen_category", "field": "features.job",
                                  "message": "a category training never saw; scored as the unknown category"}]
