"""trustlab audit (issue 30): the planted problems are found on the planted table and nothing on the clean one,
bad inputs fail clearly, model files load safely, the CLI and its fail-on policy, the report files."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import (
    AuditReport,
    audit,
    example_table,
    load_model,
    parse_estimator,
    parse_fail_on,
    read_table,
)
from trustlab.core.exceptions import InputError, TrustlabError, UnsupportedModelError

#: the model the example tables are audited with in the tests and docs (a regularised forest)
SPEC = "sklearn.ensemble.RandomForestClassifier(n_estimators=50, min_samples_leaf=10)"
#: small budgets so the default test run stays fast (the full defaults run in the slow test)
FAST = {"membership": {"n_reference": 2}, "multiplicity": {"n_models": 3}}
FAST_CHECKS = "data_quality,leakage,membership,multiplicity,explanation_controls,interpretability_gap"


def _xy(name: str) -> tuple[pd.DataFrame, pd.Series]:
    df = read_table(f"example:{name}")
    return df.drop(columns="y"), df["y"]


def _provenance() -> dict:
    return json.loads((example_table("planted").parent / "provenance.json").read_text())["planted.csv"]


@pytest.fixture(scope="module")
def planted() -> AuditReport:
    X, y = _xy("planted")
    return audit(SPEC, X, y, checks=FAST_CHECKS, settings=FAST, random_state=0)


@pytest.fixture(scope="module")
def clean() -> AuditReport:
    X, y = _xy("clean")
    return audit(SPEC, X, y, checks=FAST_CHECKS, settings=FAST, random_state=0)


def test_planted_table_flags_the_planted_problems_and_their_rows(planted):
    prov = _provenance()
    dq = planted.check("data_quality")
    assert dq.status == "flag"
    # each planted copy and its source form a pair; the audit names the later row of each pair in file order
    pairs = {int(r): src for r, src in prov["duplicate_of"].items()}
    for kind in ("exact", "near"):
        expected = {max(r, pairs[r]) for r in prov[f"{kind}_duplicate_rows"]}
        assert set(dq.rows[f"{kind}_duplicates"]) == expected, kind
    flips = set(prov["flipped_rows"])
    # the flagged rows are the flipped rows (and copies of flipped rows, which carry the same wrong label)
    copies = {int(r) for r, src in prov["duplicate_of"].items() if src in flips}
    found = set(dq.rows["suspect_labels"])
    assert len(found & flips) >= 0.8 * len(flips)  # cleanlab finds 26 of the 30 (docs/audit.md)
    assert len(set(dq.rows["knn_suspect_labels"]) & flips) >= 0.9 * len(flips)  # the KNN-Shapley rule 30
    assert found <= flips | copies
    leak = planted.check("leakage")
    assert leak.status == "flag" and leak.details == ["leaky features: ['leak']"]


def test_clean_table_flags_nothing(clean):
    assert clean.flagged == []
    assert clean.check("data_quality").metrics["duplicate_rows"] == 0
    assert clean.check("data_quality").metrics["near_duplicate_rows"] == 0
    # the KNN rule flags at most a row or two of a clean table (1 of 600 here), far below the 2 % policy
    assert clean.check("data_quality").metrics["suspect_labels"] <= 2
    assert clean.check("leakage").metrics["leaky_features"] == 0


def test_planted_flags_beyond_the_planted_checks_are_the_documented_ones(planted):
    """Label noise is memorised (the RMIA AUC rises above 0.6), but on 630 rows its 95 % lower bound does not clear
    0.6, so membership is not flagged since issue 42 (docs/audit.md)."""
    assert set(planted.flagged) == {"data_quality", "leakage"}
    m = planted.check("membership").metrics
    assert m["membership_auc"] > 0.6 >= m["membership_auc_lower"]
    assert planted.check("explanation_controls").status == "ok"
    assert planted.check("multiplicity").status == "ok"
    assert planted.check("interpretability_gap").status == "info"


def test_report_files_are_written_with_every_plot(planted, tmp_path):
    paths = planted.write(tmp_path / "out")
    html = paths["html"].read_text()
    n_plots = sum(len(c.plots) for c in planted.checks)
    assert n_plots >= 5 and html.count('<img class="plot"') == n_plots
    assert 'id="summary"' in html and html.count("<tr class=\"status-") == len(planted.checks)
    md = paths["markdown"].read_text()
    assert "| check | verdict | finding |" in md and len(list((tmp_path / "out" / "plots").glob("*.png"))) == n_plots
    data = json.loads(paths["json"].read_text())
    assert data["flagged"] == planted.flagged and data["provenance"]["versions"]["scikit-learn"]
    assert not list((tmp_path / "out").glob(".*.trustlab-tmp"))


def test_fail_on_policy():
    from trustlab.audit import FailRule

    assert parse_fail_on("membership_auc>0.6, duplicate_rows>=1") == [FailRule("membership_auc", ">", 0.6),
                                                                     FailRule("duplicate_rows", ">=", 1.0)]
    assert parse_fail_on("membership_auc?>0.6") == [FailRule("membership_auc", ">", 0.6, optional=True)]
    assert parse_fail_on("any") == [FailRule("flagged", ">", 0.0), FailRule("errored", ">", 0.0)]
    with pytest.raises(InputError, match="must be rules like"):
        parse_fail_on("membership_auc is big")
    X, y = _xy("planted")
    rep = audit(SPEC, X, y, checks="data_quality,leakage", fail_on="duplicate_rows>0,leakage_gap>0.5")
    assert rep.policy_failures == ["duplicate_rows=18 > 0"] and not rep.passed
    with pytest.raises(InputError, match="Did you mean one of 'duplicate_rows'"):
        audit(SPEC, X, y, checks="leakage", fail_on="duplicate_row>0")


def test_fail_on_fails_closed_on_checks_that_did_not_run_skipped_or_errored(monkeypatch):
    from sklearn.linear_model import LogisticRegression

    from trustlab.audit import _checks

    X, y = _xy("clean")
    # not run (not in --checks): fails closed, passes only when the rule says '?'
    rep = audit(SPEC, X, y, checks="leakage", fail_on="membership_auc>0.5")
    assert not rep.passed and "check 'membership' did not run" in rep.policy_failures[0]
    assert audit(SPEC, X, y, checks="leakage", fail_on="membership_auc?>0.5").passed
    # skipped: a fitted model without a test table (its training rows are unknown)
    fitted = LogisticRegression().fit(X, y)
    rep = audit(fitted, X, y, checks="leakage,membership", fail_on="membership_auc>0.5")
    assert rep.check("membership").status == "skipped"
    assert "check 'membership' was skipped" in rep.policy_failures[0]
    assert audit(fitted, X, y, checks="leakage,membership", fail_on="membership_auc?>0.5").passed

    def boom(a, s):
        raise RuntimeError("kaput")

    monkeypatch.setitem(_checks.CHECKS, "leakage", boom)
    rep = audit(SPEC, X, y, checks="leakage", fail_on="leakage_gap<0.9")
    assert "check 'leakage' errored: RuntimeError: kaput" in rep.policy_failures[0]
    # 'any' counts an errored check, not only flagged ones
    assert audit(SPEC, X, y, checks="leakage", fail_on="any").policy_failures == ["errored=1 > 0"]


def test_set_parses_typed_check_settings():
    from trustlab.audit import parse_settings

    assert parse_settings(["membership.n_reference=8", "data_quality.max_suspect_share=0.05",
                           "multiplicity.bootstrap=false"]) == {
        "membership": {"n_reference": 8}, "data_quality": {"max_suspect_share": 0.05},
        "multiplicity": {"bootstrap": False}}
    with pytest.raises(InputError, match="must be a int .*Got '2.5'"):
        parse_settings(["membership.n_reference=2.5"])
    with pytest.raises(InputError, match="Did you mean 'membership'"):
        parse_settings(["membershp.n_reference=2"])
    with pytest.raises(InputError, match="must look like check.param=value"):
        parse_settings(["n_reference=2"])


class _RaisesOnPredict:
    """A fitted classifier whose predict_proba raises (a user's broken model)."""

    classes_ = np.array([0, 1])

    def fit(self, X, y):
        return self

    def predict_proba(self, X):
        raise ZeroDivisionError("model bug")


def test_cli_exit_codes_bad_input_crash_rule(tmp_path, monkeypatch):
    """0 pass, 1 a rule holds, 2 bad input, 3 a check or the model crashed (message names it)."""
    import skops.io as sio
    from typer.testing import CliRunner

    from trustlab.audit import _checks
    from trustlab.cli._app import app

    runner = CliRunner()
    base = ["audit", "--data", "example:clean", "--target", "y", "--no-progress"]
    est = ["--estimator", SPEC, "--checks", "leakage"]
    assert runner.invoke(app, [*base, *est, "--out", str(tmp_path / "a")]).exit_code == 0
    res = runner.invoke(app, [*base, *est, "--fail-on", "leakage_gap<0.9", "--out", str(tmp_path / "b")])
    assert res.exit_code == 1 and "fail-on policy failed" in res.output
    res = runner.invoke(app, [*base, *est, "--fail-on", "membership_auc>0.5", "--out", str(tmp_path / "c")])
    assert res.exit_code == 1 and "fails closed" in res.output
    res = runner.invoke(app, [*base, *est, "--set", "leakage.tolerence=0.1", "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "Did you mean 'tolerance'" in res.output
    assert runner.invoke(app, [*base, *est, "--set", "leakage.tolerance=0.5", "--out", str(tmp_path / "e")]
                         ).exit_code == 0
    assert json.loads((tmp_path / "e" / "report.json").read_text())["checks"][0]["settings"]["tolerance"] == 0.5
    # the model raises while predicting: exit 3 naming the step, no traceback
    monkeypatch.setattr(sio, "get_untrusted_types", lambda **kw: [])
    monkeypatch.setattr(sio, "load", lambda path, trusted=None: _RaisesOnPredict())
    (tmp_path / "m.skops").write_bytes(b"x")
    res = runner.invoke(app, [*base, "--model", str(tmp_path / "m.skops"), "--checks", "leakage", "--out",
                              str(tmp_path / "f")])
    assert res.exit_code == 3 and "model raised while predicting" in res.output and "ZeroDivisionError" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)

    def boom(a, s):
        raise RuntimeError("kaput")

    monkeypatch.setitem(_checks.CHECKS, "leakage", boom)
    res = runner.invoke(app, [*base, *est, "--out", str(tmp_path / "g")])
    assert res.exit_code == 3 and "leakage: RuntimeError: kaput" in res.output
    assert (tmp_path / "g" / "report.html").is_file()  # the report of the other checks is still written


def test_cli_runs_and_exits_by_policy(tmp_path):
    from typer.testing import CliRunner

    from trustlab.cli._app import app

    runner = CliRunner()
    args = ["audit", "--data", "example:clean", "--target", "y", "--estimator", SPEC, "--checks",
            "data_quality,leakage", "--no-progress", "--fail-on", "any"]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "clean")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "clean" / "report.html").is_file() and "fail-on policy passed" in res.output
    args[2] = "example:planted"
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "planted")])
    assert res.exit_code == 1, res.output
    assert "fail-on policy failed" in res.output
    res = runner.invoke(app, ["audit", "--data", "example:clean", "--target", "Y", "--estimator", SPEC])
    assert res.exit_code == 2 and "Did you mean 'y'" in res.output


def test_cli_refuses_pickles_without_trust_pickle(tmp_path):
    import joblib
    from sklearn.linear_model import LogisticRegression
    from typer.testing import CliRunner

    from trustlab.cli._app import app

    X, y = _xy("clean")
    path = tmp_path / "m.pkl"
    joblib.dump(LogisticRegression().fit(X, y), path)
    res = CliRunner().invoke(app, ["audit", "--data", "example:clean", "--target", "y", "--model", str(path),
                                   "--checks", "leakage", "--no-progress", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2
    res = CliRunner().invoke(app, ["audit", "--data", "example:clean", "--target", "y", "--model", str(path),
                                   "--trust-pickle", "--checks", "leakage,membership", "--no-progress", "--out",
                                   str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert rep["model"]["loaded_from"].endswith("(unpickled because --trust-pickle was given)")
    # a fitted model without --test: nobody knows its training rows, so membership is skipped with the reason
    assert "needs held-out rows" in next(c for c in rep["checks"] if c["name"] == "membership")["reason"]


# -- bad inputs ---------------------------------------------------------------------------------------------
def test_missing_target_says_did_you_mean():
    from trustlab.audit._inputs import split_target

    with pytest.raises(InputError, match=r"Got 'Y'.*Did you mean 'y'"):
        split_target(read_table("example:clean"), "Y")


def test_a_bare_estimator_on_string_columns_crashes_with_a_hint():
    from trustlab.audit import AuditCrashError

    X, y = _xy("clean")
    X = X.assign(city=["a", "b"] * (len(X) // 2))
    with pytest.raises(AuditCrashError, match=r"raised while fitting.*categorical column\(s\) \['city'\].*OneHotEncoder"):
        audit(SPEC, X, y, checks="leakage")


def test_skops_untrusted_types_are_listed_and_refused(tmp_path):
    import operator

    import skops.io as sio
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import FunctionTransformer

    X, y = _xy("clean")
    safe = tmp_path / "lr.skops"
    sio.dump(LogisticRegression().fit(X, y), safe)
    assert load_model(safe).format == "skops"
    risky = tmp_path / "ft.skops"
    sio.dump(FunctionTransformer(operator.neg), risky)
    with pytest.raises(UnsupportedModelError, match=r"not trusted by default: \['_operator.neg'\].*--trust-type _operator.neg"):
        load_model(risky)
    assert load_model(risky, trusted=["_operator.neg"]).trusted_types == ["_operator.neg"]


def test_model_with_other_n_features_is_refused():
    from sklearn.linear_model import LogisticRegression

    X, y = _xy("clean")
    model = LogisticRegression().fit(X.iloc[:, :3], y)
    with pytest.raises(InputError, match=r"expects 3 features \(n_features_in_\) but the data has 6"):
        audit(model, X, y, checks="leakage")


def test_test_table_with_other_columns_is_refused():
    X, y = _xy("clean")
    with pytest.raises(InputError, match=r"'X_test' argument of audit must have the training table's columns.*"
                                         r"Missing \['f5'\], extra \['g5'\]"):
        audit(SPEC, X, y, X_test=X.rename(columns={"f5": "g5"}), y_test=y, checks="leakage")


def test_empty_file_and_header_only_file_are_refused(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="an empty file"):
        read_table(empty)
    header = tmp_path / "header.csv"
    header.write_text("a,b,y\n")
    with pytest.raises(InputError, match="no rows"):
        read_table(header)


def test_regression_target_for_a_classifier_is_refused_clearly():
    X, y = _xy("clean")
    with pytest.raises(InputError, match="regression target.*pass a regressor"):
        audit(SPEC, X, X["f0"] * 2.5, checks="leakage")


def test_one_class_target_is_refused():
    X, y = _xy("clean")
    with pytest.raises(InputError, match=r"at least two classes. Got only \[1\]"):
        audit(SPEC, X, np.ones(len(y), int), checks="leakage")


@pytest.mark.parametrize("spec, message", [
    ("os.system('rm -rf /')", "may only use classes from"),
    ("__import__('os').system('ls')", "must call a class by its full path"),
    ("sklearn.linear_model.LogisticRegression(C=__import__('os').getpid())", "must call a class by its full path"),
    ("sklearn.linear_model.LogisticRegression(C=[x for x in 'ab'])", "may only pass literals"),
    ("sklearn.linear_model.LogisticRegression(**{'C': 1})", "cannot use \\*\\*kwargs"),
    ("sklearn.linear_model.LogisticRegression(C=1); 1", "not valid syntax"),
    ("sklearn.utils._testing.assert_raises()", "may only use classes from|public class|cannot be imported"),
    ("sklearn.linear_model.NoSuchModel()", "cannot be imported"),
    ("sklearn.linear_model.LogisticRegression(bogus=1)", "fails"),
])
def test_estimator_spec_is_parsed_safely(spec, message):
    with pytest.raises(InputError, match=message):
        parse_estimator(spec)


def test_estimator_spec_builds_nested_pipelines():
    est = parse_estimator("sklearn.pipeline.Pipeline([('s', sklearn.preprocessing.StandardScaler()), "
                          "('m', sklearn.linear_model.LogisticRegression(C=0.5))])")
    assert type(est).__name__ == "Pipeline" and est.get_params()["m__C"] == 0.5
    assert parse_estimator("sklearn.tree.DecisionTreeClassifier").get_params()["max_depth"] is None


def test_unknown_check_and_setting_say_did_you_mean():
    X, y = _xy("clean")
    with pytest.raises(InputError, match="Did you mean 'leakage'"):
        audit(SPEC, X, y, checks="leakag")
    with pytest.raises(InputError, match="Did you mean 'n_reference'"):
        audit(SPEC, X, y, checks="leakage", settings={"membership": {"n_references": 2}})


def test_audit_leaves_global_rng_alone():
    from trustlab.core.seeding import global_rng_state, same_global_rng_state

    X, y = _xy("clean")
    before = global_rng_state()
    audit(SPEC, X, y, checks="leakage,data_quality")
    assert same_global_rng_state(before, global_rng_state())


def test_a_failing_check_is_an_error_outcome_not_a_crash(monkeypatch):
    from trustlab.audit import _checks

    def boom(a, s):
        raise RuntimeError("kaput")

    monkeypatch.setitem(_checks.CHECKS, "leakage", boom)
    X, y = _xy("clean")
    rep = audit(SPEC, X, y, checks="leakage,data_quality")
    assert rep.check("leakage").status == "error" and "kaput" in rep.check("leakage").reason
    assert rep.check("data_quality").status == "ok"


def test_fit_reference_estimators_complementary_halves():
    from sklearn.linear_model import LogisticRegression

    from trustlab.methods.amun import fit_reference_estimators

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    refs = fit_reference_estimators(LogisticRegression(), X, y, 4, random_state=1)
    assert refs.logits.shape == (4, 60, 2) and np.all(refs.in_mask.sum(0) == 2)
    assert np.all(refs.in_mask[0] ^ refs.in_mask[1])
    with pytest.raises(TrustlabError, match="must be even"):
        fit_reference_estimators(LogisticRegression(), X, y, 3)


@pytest.mark.slow
def test_full_audit_with_default_settings_on_both_tables():
    """Every check with its default budgets (explanation stability included; about 70 s per table)."""
    for name, expected in (("clean", set()), ("planted", {"data_quality", "leakage", "membership",
                                                           "explanation_stability"})):
        X, y = _xy(name)
        rep = audit(SPEC, X, y, random_state=0)
        assert set(rep.flagged) == expected, (name, [(c.name, c.status, c.headline) for c in rep.checks])
        assert [c.name for c in rep.checks if c.status in ("error", "skipped")] == ["fairness"]  # no --sensitive


def _planted_ablation(remove: str) -> tuple[pd.DataFrame, pd.Series]:
    """The planted table with one planted problem removed: the leaky column, or the flipped labels (restored)."""
    X, y = _xy("planted")
    prov = _provenance()
    if remove == "leak":
        return X.drop(columns=prov["leaky_feature"]), y
    flipped = set(prov["flipped_rows"])
    wrong = sorted(flipped | {int(r) for r, src in prov["duplicate_of"].items() if src in flipped})
    y = y.copy()
    y.iloc[wrong] = 1 - y.iloc[wrong]
    return X, y


@pytest.mark.slow
@pytest.mark.parametrize("remove, gone", [("leak", {"leakage", "explanation_stability"}),
                                          ("labels", {"membership"})])
def test_each_extra_flag_traces_to_a_planted_problem(remove, gone):
    """Written before it was first run: the two flags beyond the planted checks (membership, explanation
    stability) are consequences of planted problems, so removing that problem alone must clear them, while the
    other planted problems are still flagged."""
    X, y = _planted_ablation(remove)
    rep = audit(SPEC, X, y, random_state=0)
    assert not gone & set(rep.flagged), (remove, [(c.name, c.status, c.headline) for c in rep.checks])
    assert "data_quality" in rep.flagged


def test_example_table_names():
    assert example_table("clean").name == "clean.csv"
    with pytest.raises(TrustlabError, match=re.escape("one of ['clean', 'planted']")):
        example_table("dirty")


def _tiny_net():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_torch_classifier_from_factory_and_safetensors(tmp_path):
    import torch
    from safetensors.torch import save_file

    from trustlab.audit import load_torch_classifier

    torch.manual_seed(0)
    path = tmp_path / "net.safetensors"
    save_file(_tiny_net().state_dict(), str(path))
    clf = load_torch_classifier(_tiny_net, path)
    X, y = _xy("clean")
    rep = audit(clf, X.iloc[:400], y.iloc[:400], X_test=X.iloc[400:], y_test=y.iloc[400:],
                checks="leakage,membership,multiplicity")
    assert rep.check("leakage").status in ("ok", "flag")
    assert "cannot be refitted" in rep.check("membership").reason
    assert "cannot be refitted" in rep.check("multiplicity").reason
    with pytest.raises(InputError, match="must be 'package.module:function'"):
        load_torch_classifier("no_colon", path)
    with pytest.raises(InputError, match="do not fit the factory's module"):
        load_torch_classifier(lambda: torch.nn.Linear(3, 2), path)


# -- real pipelines: string categoricals and missing values end to end -------------------------------------------
def _mixed_table() -> pd.DataFrame:
    """The clean table with a string column that carries signal (and is sometimes missing) and NaN in f1."""
    df = read_table("example:clean")
    rng = np.random.default_rng(0)
    df["city"] = np.where(df["y"].to_numpy() == 1, rng.choice(["north", "south", "east"], len(df), p=[.6, .3, .1]),
                          rng.choice(["north", "south", "east"], len(df), p=[.2, .3, .5])).astype(object)
    df.loc[rng.random(len(df)) < 0.05, "city"] = np.nan
    df.loc[rng.random(len(df)) < 0.1, "f1"] = np.nan
    return df


def _pipeline():
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    num = [f"f{j}" for j in range(6)]
    pre = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["city"]),
                             ("num", Pipeline([("imp", SimpleImputer()), ("sc", StandardScaler())]), num)])
    return Pipeline([("pre", pre), ("lr", LogisticRegression())])


#: every check, with budgets small enough for the default test run
SMALL = ["--set", "membership.n_reference=2", "--set", "multiplicity.n_models=3", "--set",
         "explanation_stability.max_rows=200", "--set", "explanation_stability.n_explore=2", "--set",
         "explanation_stability.budget=1", "--set", "explanation_stability.n_features=1", "--set",
         "explanation_controls.n_rows=8", "--set", "explanation_controls.n_background=8", "--set",
         "fairness.n_boot=20", "--sensitive", "city"]


def test_skops_pipeline_with_string_categoricals_and_nan_audits_end_to_end(audit_skops_cli):
    """Done-when of issue 42: a skops-saved Pipeline(ColumnTransformer(OneHotEncoder, SimpleImputer+StandardScaler),
    LogisticRegression) on a table with string categoricals and NaN audits end to end from the CLI."""
    df = _mixed_table()
    train, test = df.iloc[:420], df.iloc[420:]
    model = _pipeline().fit(train.drop(columns="y"), train["y"])
    _, rep = audit_skops_cli(train, test, model, *SMALL)
    status = {c["name"]: (c["status"], c["reason"]) for c in rep["checks"]}
    assert all(s in ("ok", "flag", "info") for s, _ in status.values()), status
    assert rep["data"]["categorical"] == ["city"] and rep["data"]["missing_values"] > 0
    # the audited accuracy is the pipeline's own on the user's table
    acc = next(c for c in rep["checks"] if c["name"] == "leakage")["metrics"]["model_accuracy"]
    assert acc == pytest.approx(model.score(test.drop(columns="y"), test["y"]))


def test_pipeline_spec_selecting_columns_by_name_is_refitted_on_the_table():
    X, y = _mixed_table().drop(columns="y"), _mixed_table()["y"]
    spec = ("sklearn.pipeline.Pipeline([('pre', sklearn.compose.ColumnTransformer(["
            "('cat', sklearn.preprocessing.OneHotEncoder(handle_unknown='ignore'), ['city']), "
            "('num', sklearn.impute.SimpleImputer(), ['f0', 'f1', 'f2'])])), "
            "('m', sklearn.linear_model.LogisticRegression())])")
    rep = audit(spec, X, y, checks="data_quality,leakage,membership,multiplicity", settings=FAST, random_state=0)
    assert [c.status for c in rep.checks if c.status in ("error", "skipped")] == []
    assert rep.check("leakage").metrics["model_accuracy"] > 0.9
    # the data checks' encoding: 6 numbers, f1's missing indicator, 3 one-hot city columns and city=missing
    assert rep.data["encoded_features"] == 11 and rep.data["n_features"] == 7


def test_table_codes_decode_back_to_the_users_table():
    from trustlab.audit._table import TableSchema

    df = _mixed_table().drop(columns="y")
    df["when"] = pd.Categorical(np.where(df["f0"] > 0, "am", "pm"))
    schema = TableSchema.infer([df])
    R = schema.to_codes(df)
    back = schema.decode(R)
    pd.testing.assert_frame_equal(back, df, check_dtype=True)
    Rs, sch = schema.with_sentinels(R)
    assert np.isfinite(Rs).all()
    pd.testing.assert_frame_equal(sch.decode(Rs), df)
    Z, names = schema.encode(R)
    assert np.isfinite(Z).all() and "city=north" in names and "city=missing" in names and "f1=missing" in names


# -- the checks added in issue 42: conflicting labels, calibration, drift, fairness --------------------------------
def test_conflicting_label_duplicates_are_reported():
    X, y = _xy("clean")
    rows = [3, 10, 50]
    X2 = pd.concat([X, X.iloc[rows]], ignore_index=True)
    y2 = pd.concat([y, 1 - y.iloc[rows]], ignore_index=True)
    dq = audit(SPEC, X2, y2, checks="data_quality", random_state=0).check("data_quality")
    assert dq.metrics["conflicting_label_rows"] == 6 and dq.status == "flag"
    assert set(dq.rows["conflicting_labels"]) == set(rows) | {600, 601, 602}
    assert dq.metrics["duplicate_rows"] == 0  # a copy with another label is a conflict, not a duplicate


class _Sharpened:
    """A fitted logistic regression whose probabilities are sharpened (temperature 0.1): overconfident."""

    def __init__(self, model):
        self.model, self.classes_ = model, model.classes_

    def fit(self, X, y):
        return self

    def predict_proba(self, X):
        logit = self.model.decision_function(X) / 0.1
        p = 1 / (1 + np.exp(-logit))
        return np.c_[1 - p, p]


def test_calibration_flags_an_overconfident_model_and_not_a_calibrated_one():
    from sklearn.linear_model import LogisticRegression

    df = read_table("example:planted")  # 30 flipped labels: an overconfident model is wrong with confidence
    X, y = df.drop(columns="y"), df["y"]
    lr = LogisticRegression().fit(X.iloc[:400], y.iloc[:400])
    kw = {"X_test": X.iloc[400:], "y_test": y.iloc[400:], "checks": "calibration"}
    ok = audit(lr, X.iloc[:400], y.iloc[:400], **kw).check("calibration")
    bad = audit(_Sharpened(lr), X.iloc[:400], y.iloc[:400], **kw).check("calibration")
    assert ok.status == "ok" and bad.status == "info", (ok.headline, bad.headline)  # reported, not gated by default
    gated = audit(_Sharpened(lr), X.iloc[:400], y.iloc[:400], settings={"calibration": {"max_ece": 0.05}}, **kw)
    assert gated.check("calibration").status == "flag"
    assert bad.metrics["calibration_ece"] > 2 * ok.metrics["calibration_ece"]
    from sklearn.metrics import brier_score_loss

    assert ok.metrics["brier_score"] == pytest.approx(brier_score_loss(y.iloc[400:], lr.predict_proba(X.iloc[400:])[:, 1]))


def test_drift_flags_a_shifted_test_table_and_names_the_feature():
    X, y = _xy("clean")
    same = audit(SPEC, X.iloc[:400], y.iloc[:400], X_test=X.iloc[400:], y_test=y.iloc[400:], checks="drift")
    shifted = X.iloc[400:].assign(f4=X["f4"].iloc[400:] + 1.5)
    moved = audit(SPEC, X.iloc[:400], y.iloc[:400], X_test=shifted, y_test=y.iloc[400:], checks="drift")
    assert same.check("drift").status == "ok" and same.check("drift").metrics["drifted_features"] == 0
    d = moved.check("drift")
    # a 1.5 sd shift of one feature: the best possible domain AUC is Phi(1.5 / sqrt 2) = 0.86
    assert d.status == "flag" and d.metrics["domain_auc"] > 0.7 and d.metrics["drifted_features"] == 1
    assert d.details[0].startswith("f4 (KS)")


def test_fairness_slices_match_the_selection_rates_per_group():
    df = _mixed_table()
    X, y = df.drop(columns="y"), df["y"]
    spec = ("sklearn.pipeline.Pipeline([('pre', sklearn.compose.ColumnTransformer(["
            "('cat', sklearn.preprocessing.OneHotEncoder(handle_unknown='ignore'), ['city']), "
            "('num', sklearn.impute.SimpleImputer(), ['f0', 'f1', 'f2', 'f3', 'f4', 'f5'])])), "
            "('m', sklearn.linear_model.LogisticRegression())])")
    rep = audit(spec, X, y, checks="fairness", sensitive=["city"], settings={"fairness": {"n_boot": 20}})
    f = rep.check("fairness")
    # the same model refitted here: its held-out predictions' positive rate per city group
    model = parse_estimator(spec)
    from sklearn.model_selection import train_test_split

    tr, te = train_test_split(np.arange(len(y)), test_size=0.3, random_state=0, stratify=y)
    pred = model.fit(X.iloc[np.sort(tr)], y.iloc[np.sort(tr)]).predict(X.iloc[np.sort(te)])
    groups = X["city"].iloc[np.sort(te)].fillna("missing").to_numpy()
    rates = [pred[groups == g].mean() for g in np.unique(groups)]
    assert f.metrics["fairness_city_demographic_parity_difference"] == pytest.approx(max(rates) - min(rates))
    assert f.status == "flag"  # city carries the label by construction, so the selection rates differ
    assert audit(spec, X, y, checks="fairness").check("fairness").status == "skipped"
    with pytest.raises(InputError, match="Did you mean 'city'"):
        audit(spec, X, y, checks="fairness", sensitive=["cty"])


def test_a_check_is_quiet_about_feature_names_where_it_runs(monkeypatch):
    """The feature-name filter is entered inside run_check, so a check in a process or Ray worker is as quiet as
    one run locally (the 100k benchmark printed one UserWarning per worker call before)."""
    import warnings

    from trustlab.audit import _checks

    def noisy(inputs, settings):
        warnings.warn("X does not have valid feature names, but RandomForestClassifier was fitted with feature names",
                      UserWarning, stacklevel=1)
        return _checks._outcome("leakage", "ok", "fine", settings=settings)

    monkeypatch.setitem(_checks.CHECKS, "leakage", noisy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _checks.run_check("leakage", None, {})
    assert out.status == "ok" and not caught
