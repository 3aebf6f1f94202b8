"""Bad input gets a clear error that names the problem and the fix."""

from __future__ import annotations

import numpy as np
import pytest

from vsplit.errors import AlignmentError, ConfigError, DataError
from vsplit.estimator import SplitClassifier


def fit(views, **kwargs):
    return SplitClassifier(label_party="bank", label="y", epochs=1, random_state=0, candidates="network",
                           **kwargs).fit(views)


def test_missing_feature_column_is_named_when_scoring(views):
    clf = fit(views)
    broken = dict(views, partner=views["partner"].drop(columns=["spend"]))
    with pytest.raises(DataError, match=r"\['spend'\] are missing"):
        clf.predict_proba(broken)


def test_missing_id_column_is_named(views):
    broken = dict(views, partner=views["partner"].rename(columns={"customer_id": "cid"}))
    with pytest.raises(DataError, match="partner: ID column 'customer_id' is missing"):
        fit(broken)


def test_label_missing_on_the_label_party(views):
    broken = dict(views, bank=views["bank"].drop(columns=["y"]))
    with pytest.raises(DataError, match="bank: label column 'y' is missing"):
        fit(broken)


def test_label_column_on_the_wrong_party(views):
    partner = views["partner"].assign(y="no")
    with pytest.raises(DataError, match=r"partner: has the label column 'y'.*only the label party may hold labels"):
        fit(dict(views, partner=partner))


def test_empty_table(views):
    with pytest.raises(DataError, match="partner: the table is empty"):
        fit(dict(views, partner=views["partner"].iloc[:0]))


def test_nan_in_features_names_the_column_and_the_fix(views):
    partner = views["partner"].copy()
    partner.loc[3, "spend"] = np.nan
    with pytest.raises(DataError, match=r"missing values \(NaN\) in columns \{'spend': 1\}.*missing='impute'"):
        fit(dict(views, partner=partner))


def test_nan_in_features_imputed_on_request(views):
    partner = views["partner"].copy()
    partner.loc[3, "spend"] = np.nan
    clf = fit(dict(views, partner=partner), missing="impute")
    assert np.isfinite(clf.predict_proba(dict(views, partner=partner))[:, 1][clf.rows_["bank"]]).all()


def test_duplicate_customer_ids(views):
    partner = views["partner"].copy()
    partner.loc[1, "customer_id"] = partner.loc[0, "customer_id"]
    with pytest.raises(DataError, match=r"partner: 1 duplicate customer IDs.*deduplicate"):
        fit(dict(views, partner=partner))


def test_no_shared_customers(views):
    partner = views["partner"].assign(customer_id=[f"X{i}" for i in range(len(views["partner"]))])
    with pytest.raises(AlignmentError, match="no customer is shared by all parties"):
        fit(dict(views, partner=partner))


def test_label_with_three_values(views):
    bank = views["bank"].copy()
    bank.loc[0, "y"] = "maybe"
    with pytest.raises(DataError, match="3 distinct values"):
        fit(dict(views, bank=bank))


def test_unknown_label_party_and_merge(views):
    with pytest.raises(ConfigError, match="label_party 'insurer' is not among the views"):
        SplitClassifier(label_party="insurer").fit(views)
    with pytest.raises(ConfigError, match=r"unknown merge 'max'; choose one of: attention, concat, mean, sum"):
        fit(views, merge="max")
