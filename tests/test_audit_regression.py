"""trustlab audit on regressors (issue 42): every check with a regression analogue runs it, the others are skipped
with a reason, planted problems are found, the attacks tell a memorising model from a smooth one, and the CLI audits
a skops-saved regression pipeline on a table with string categoricals and NaN."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, RegressorMixin

from trustlab.audit import audit
from trustlab.core.exceptions import InputError

RIDGE = "sklearn.linear_model.Ridge(alpha=1.0)"
FAST = {"membership": {"n_reference": 2}, "multiplicity": {"n_models": 3}, "calibration": {"n_null": 100}}
REGRESSION_CHECKS = ("data_quality", "leakage", "membership", "multiplicity", "explanation_controls", "calibration",
                     "drift")


def _table(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    """A linear target of four numbers and a string column, with Gaussian noise (sd 0.5)."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=[f"f{j}" for j in range(4)])
    X["city"] = rng.choice(["north", "south", "east"], n).astype(object)
    y = X["f0"] * 2 - X["f1"] + 0.5 * X["f2"] + X["city"].map({"north": 1.0, "south": 0.0, "east": -1.0})
    return X, pd.Series(y + rng.normal(scale=0.5, size=n), name="y")


def _pipeline(final=None):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["city"]),
                             ("num", Pipeline([("imp", SimpleImputer()), ("sc", StandardScaler())]),
                              [f"f{j}" for j in range(4)])])
    return Pipeline([("pre", pre), ("m", final if final is not None else Ridge())])


class _Shifted(RegressorMixin, BaseEstimator):
    """Ridge on the numbers, its predictions moved up by ``shift`` (a biased, miscalibrated regressor)."""

    def __init__(self, shift: float = 0.0):
        self.shift = shift

    def fit(self, X, y):
        from sklearn.linear_model import Ridge

        self.m_ = Ridge().fit(X, y)
        return self

    def predict(self, X):
        return self.m_.predict(X) + self.shift


@pytest.fixture(scope="module")
def ridge_report():
    X, y = _table()
    return audit(_pipeline(), X, y, settings=FAST, random_state=0)


def test_every_regression_check_runs_and_the_rest_are_skipped_with_a_reason(ridge_report):
    status = {c.name: c for c in ridge_report.checks}
    for name in REGRESSION_CHECKS:
        assert status[name].status in ("ok", "flag", "info"), (name, status[name].reason)
    for name, why in [("explanation_stability", "classifiers"), ("interpretability_gap", "classification trees"),
                      ("fairness", "no sensitive column")]:
        assert status[name].status == "skipped" and why in status[name].reason
    assert ridge_report.data["task"] == "regression" and ridge_report.data["classes"] == []
    assert ridge_report.data["categorical"] == ["city"]
    # a correctly specified linear model on a clean table: the score is the pipeline's own R^2 and nothing flags
    assert ridge_report.check("leakage").metrics["model_r2"] > 0.9
    assert ridge_report.flagged == []


def test_fairness_on_a_regressor_is_skipped_with_the_reason():
    X, y = _table()
    rep = audit(_pipeline(), X, y, checks="fairness", sensitive=["city"], random_state=0)
    assert rep.check("fairness").status == "skipped" and "defined for classifiers" in rep.check("fairness").reason


def test_planted_leak_duplicates_conflicts_and_label_errors_are_found():
    X, y = _table(seed=1)
    rng = np.random.default_rng(1)
    leaky = X.drop(columns="city").assign(leak=y + rng.normal(scale=0.05, size=len(y)))  # the target, disguised
    spec = "sklearn.ensemble.RandomForestRegressor(n_estimators=30, min_samples_leaf=5)"
    leak = audit(spec, leaky, y, checks="leakage", random_state=0).check("leakage")
    assert leak.status == "flag" and "leak" in leak.headline
    y = y.copy()
    bad = rng.choice(len(y), 20, replace=False)
    y.iloc[bad] += rng.choice([-1, 1], 20) * 8 * y.std()  # 5 % of targets corrupted by 8 sd
    X = pd.concat([X, X.iloc[:3]], ignore_index=True)  # three repeated rows with other targets
    y = pd.concat([y, y.iloc[:3] + 5.0], ignore_index=True)
    rep = audit(_pipeline(), X, y, checks="data_quality", random_state=0)
    dq = rep.check("data_quality")
    assert dq.status == "flag" and dq.metrics["conflicting_label_rows"] == 6
    assert set(bad.tolist()) <= set(dq.rows["suspect_labels"])  # every corrupted target is a residual outlier
    assert dq.metrics["suspect_label_share"] < 0.1  # and little else
    assert dq.metrics["label_issue_cleanlab_jaccard"] > 0.5  # cleanlab's lowest-quality rows agree


def test_membership_tells_a_memorising_model_from_a_smooth_one():
    X, y = _table(n=300, seed=2)
    X = X.drop(columns="city")
    tree = audit("sklearn.tree.DecisionTreeRegressor()", X, y, checks="membership", settings=FAST, random_state=0)
    ridge = audit(RIDGE, X, y, checks="membership", settings=FAST, random_state=0)
    m_tree, m_ridge = tree.check("membership"), ridge.check("membership")
    assert m_tree.status == "flag" and m_tree.metrics["membership_auc_calibrated_loss"] > 0.8
    assert m_ridge.status == "ok" and m_ridge.metrics["membership_auc_lower"] <= 0.6
    assert "calibrated loss" in m_tree.headline


def test_residual_calibration_sees_a_biased_model_and_not_an_unbiased_one():
    X, y = _table(n=600, seed=3)
    X = X.drop(columns="city")
    cal = {"calibration": {"n_null": 100, "max_ece": 0.1}}
    fine = audit(_Shifted(0.0), X, y, checks="calibration", settings=cal, random_state=0).check("calibration")
    off = audit(_Shifted(float(y.std())), X, y, checks="calibration", settings=cal, random_state=0).check("calibration")
    assert fine.status == "ok" and abs(fine.metrics["residual_bias"]) < 0.1
    assert off.status == "flag" and off.metrics["residual_bias"] == pytest.approx(-1.0, abs=0.15)
    assert off.metrics["calibration_ece"] > off.metrics["calibration_ece_null95"]


def test_multiplicity_grows_with_an_unstable_model():
    X, y = _table(n=300, seed=4)
    X = X.drop(columns="city")
    tight = {**FAST, "multiplicity": {"n_models": 3, "range_tol": 0.5}}  # the default 1.25 is calibrated on forests
    stable = audit(RIDGE, X, y, checks="multiplicity", settings=tight, random_state=0).check("multiplicity")
    wild = audit("sklearn.tree.DecisionTreeRegressor()", X, y, checks="multiplicity", settings=tight,
                 random_state=0).check("multiplicity")
    assert stable.status == "ok" and stable.metrics["arbitrariness"] < 0.05
    assert wild.status == "flag" and wild.metrics["arbitrariness"] > 0.17
    assert wild.metrics["range_tol_to_flag"] > 0.5 > stable.metrics["range_tol_to_flag"]


def test_fail_on_a_regression_metric():
    X, y = _table(n=200)
    X = X.drop(columns="city")
    rep = audit(RIDGE, X, y, checks="leakage,membership", settings=FAST, fail_on="model_r2<0.99", random_state=0)
    assert rep.policy_failures and "model_r2" in rep.policy_failures[0]
    rep = audit(RIDGE, X, y, checks="leakage", fail_on="membership_auc_calibrated_loss>0.6", random_state=0)
    assert rep.policy_failures  # fails closed: the membership check did not run


def test_regression_targets_are_checked():
    X, y = _table(n=100)
    X = X.drop(columns="city")
    with pytest.raises(InputError, match="pass a regressor"):
        audit("sklearn.linear_model.LogisticRegression()", X, y, checks="leakage")
    with pytest.raises(InputError, match="must be finite for a regressor"):
        audit(RIDGE, X, y.where(y > 0), checks="leakage")
    with pytest.raises(InputError, match="must hold numbers for a regressor"):
        audit(RIDGE, X, np.array(["a", "b"] * 50), checks="leakage")
    with pytest.raises(InputError, match="must vary for a regressor"):
        audit(RIDGE, X, np.ones(100), checks="leakage")


def test_cli_audits_a_skops_regression_pipeline_with_categoricals_and_nan(audit_skops_cli):
    X, y = _table(n=400, seed=5)
    rng = np.random.default_rng(5)
    X.loc[rng.random(len(X)) < 0.05, "city"] = np.nan
    X.loc[rng.random(len(X)) < 0.1, "f1"] = np.nan
    df = X.assign(y=y)
    train, test = df.iloc[:280], df.iloc[280:]
    model = _pipeline().fit(train.drop(columns="y"), train["y"])
    _, rep = audit_skops_cli(train, test, model, "--set", "membership.n_reference=2",
                             "--set", "multiplicity.n_models=3", "--fail-on", "any")
    status = {c["name"]: c["status"] for c in rep["checks"]}
    assert all(status[n] in ("ok", "flag", "info") for n in REGRESSION_CHECKS), status
    assert rep["data"]["task"] == "regression" and rep["data"]["missing_values"] > 0
    r2 = next(c for c in rep["checks"] if c["name"] == "leakage")["metrics"]["model_r2"]
    assert r2 == pytest.approx(model.score(test.drop(columns="y"), test["y"]))
