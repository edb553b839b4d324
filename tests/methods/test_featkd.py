"""FEAT-KD: teacher signals vs pytorch-tabnet, symbolic conversion vs gplearn, exported formula vs model,
numpy-only predict, size rules, recovery checks, bad inputs, baselines, and the quick experiment."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pytorch_tabnet")
pytest.importorskip("gplearn")
sp = pytest.importorskip("sympy")

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError  # noqa: E402
from trustlab.methods.featkd import (  # noqa: E402
    FEATKDRegressor,
    FormulaGuardWarning,
    SymbolicFeature,
    expression_nodes,
    feat_complexity,
    fit_gplearn_on_y,
    fit_ridge,
    is_equivalent,
    make_formula_task,
    r2_per_target,
    teacher_baseline,
    term_recovered,
)
from trustlab.methods.featkd import _teacher as T  # noqa: E402
from trustlab.methods.featkd._distill import select_inputs, teacher_signals  # noqa: E402
from trustlab.methods.featkd._symbolic import numpy_code, program_to_sympy  # noqa: E402

TINY = {"n_d": 2, "n_a": 2, "n_steps": 2, "max_epochs": 3, "patience": 2, "batch_size": 32,
        "virtual_batch_size": 16, "population_size": 40, "generations": 2, "fidelity_threshold": 0.0, "cv": 2}
x0, x1, x2, x3 = sp.symbols("x0 x1 x2 x3")


@pytest.fixture(scope="module")
def task():
    return make_formula_task("product_sine", 160, random_state=0)


@pytest.fixture(scope="module")
def fitted(task):
    return FEATKDRegressor(**TINY, random_state=0).fit(task.X[:120], task.y[:120])


# ------------------------------------------------------------------------------ teacher signals
def test_step_outputs_are_the_teachers(fitted, task):
    """d_k from our read-out sum to the library's own prediction through W_final, and equal what the
    encoder's feature transformers emit (captured by forward hooks) after ReLU of the first n_d columns."""
    import torch

    teacher = fitted.teacher_
    Xs = ((task.X[120:] - fitted.x_mean_) / fitted.x_scale_).astype(np.float32)
    D = T.step_outputs(teacher, Xs)
    assert D.shape == (2, 40, 2)
    W = T.head_weights(teacher)
    np.testing.assert_allclose(D.sum(0) @ W.T, teacher.predict(Xs), rtol=1e-5, atol=1e-5)
    captured = []
    hooks = [ft.register_forward_hook(lambda m, i, o: captured.append(o.detach().clone()))
             for ft in teacher.network.tabnet.encoder.feat_transformers]
    try:
        with torch.no_grad():
            teacher.network(torch.from_numpy(Xs))
    finally:
        for h in hooks:
            h.remove()
    for k, out in enumerate(captured):
        np.testing.assert_allclose(D[k], torch.relu(out[:, :2]).numpy(), rtol=1e-6, atol=1e-7)
    # choice B: per-step contributions are W_m . d_k
    sig = teacher_signals(D, W, "step_contributions")
    np.testing.assert_allclose(sig[1].values, D[1] @ W[0])
    assert [(s.step, s.unit) for s in teacher_signals(D, W, "step_outputs")] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_mask_selection_falls_back_to_top_inputs():
    masks = np.array([[0.0, 0.0, 0.0, 0.0], [0.6, 0.01, 0.3, 0.09]])
    assert select_inputs(masks, 0.05, 2) == [(0, 1), (0, 2, 3)]


# ------------------------------------------------------------------------------ symbolic layer
def test_program_to_sympy_matches_gplearn_execution():
    from gplearn.genetic import SymbolicRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(0.5, 2.0, size=(200, 3))  # away from every protected region (|x| > 0.001)
    y = X[:, 0] * X[:, 1] + np.log(X[:, 2])
    reg = SymbolicRegressor(population_size=200, generations=3, random_state=0,
                            function_set=("add", "sub", "mul", "div", "sqrt", "log", "sin", "cos")).fit(X, y)
    expr = program_to_sympy(reg._program, [x0, x1, x2])
    env = {"numpy": np, "abs": np.abs, "x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2]}
    ours = np.broadcast_to(eval(numpy_code(expr), env), (200,))  # noqa: S307
    np.testing.assert_allclose(ours, reg._program.execute(X), rtol=1e-9, atol=1e-9)


def test_size_rules():
    e = x0 * x1 + sp.sin(x2)
    assert expression_nodes(e) == 6 and feat_complexity(e) == 1 * (1 + 2 * 3 + 3 * 2)
    assert expression_nodes(x0 - x1) == 3 and expression_nodes(x0 / x1) == 3 and expression_nodes(x0 ** 2) == 2
    assert expression_nodes(-x0) == 2
    with pytest.raises(ConfigError, match="sympy expression"):
        expression_nodes("x0 + 1")


def test_recovery_checks():
    truth = x0 * x1 + sp.sin(x2)
    assert is_equivalent(0.98 * x0 * x1 + 1.04 * sp.sin(x2) + 0.01 * x3, truth)
    assert not is_equivalent(0.98 * x0 * x1 + 0.6 * sp.sin(x2), truth)
    assert term_recovered(3.1 * x0 * x1 - 0.2, x0 * x1)
    assert term_recovered(sp.Float(2.0) * sp.sin(1.02 * x2), sp.sin(x2))
    assert not term_recovered(x0 * x1 + sp.sin(x2), x0 * x1)
    assert not term_recovered(x0 + x1, x0 * x1)


def test_formula_tasks():
    t = make_formula_task("shared", 50, n_targets=2, random_state=1)
    assert t.X.shape == (50, 8) and t.y.shape == (50, 2) and len(t.truth) == 2
    assert set(map(str, t.truth_terms())) == {"x0*x1", "sin(x2)", "x3**2"}
    clean = make_formula_task("ratio", 50, noise=0.0, random_state=1)
    np.testing.assert_allclose(clean.y, clean.X[:, 0] ** 2 / (1 + clean.X[:, 1] ** 2) + 0.5 * clean.X[:, 3])
    with pytest.raises(ConfigError, match="n_targets"):
        make_formula_task("ratio", 50, n_targets=2)


# ------------------------------------------------------------------------------ the regressor
def test_fit_state_and_exports(fitted, task):
    assert fitted.features_ and fitted.coef_.shape == (len(fitted.features_),)
    cx = fitted.complexity_
    assert cx.n_nodes == cx.feature_nodes + 3 * cx.n_features + 1 and cx.teacher_parameters == fitted.teacher_parameters_
    text = fitted.export_text(feature_names=[f"v{j}" for j in range(8)])
    assert text.startswith("y = ") and "f1 = " in text and "x0" not in text
    assert "\\hat{y}" in fitted.to_latex()
    ns: dict = {}
    exec(fitted.export_numpy(), ns)  # noqa: S102 - our own generated source
    Xte = task.X[120:]
    np.testing.assert_array_equal(ns["predict"](Xte), fitted.predict(Xte))
    formula = fitted.sympy_formulas()[0]
    lam = sp.lambdify(sorted(formula.free_symbols, key=str), formula, "numpy")
    args = [Xte[:, int(s.name[1:])] for s in sorted(formula.free_symbols, key=str)]
    if fitted.guard_report(Xte).touched == 0:
        np.testing.assert_allclose(lam(*args), fitted.predict(Xte), rtol=1e-9, atol=1e-9)


def test_same_seed_same_formula(task, fitted):
    again = FEATKDRegressor(**TINY, random_state=0).fit(task.X[:120], task.y[:120])
    assert again.formula_hash_ == fitted.formula_hash_
    np.testing.assert_array_equal(again.predict(task.X[120:]), fitted.predict(task.X[120:]))


def test_multi_output_shares_features():
    t = make_formula_task("shared", 160, n_targets=2, random_state=0)
    m = FEATKDRegressor(**TINY, targets="step_outputs", random_state=0).fit(t.X[:120], t.y[:120])
    assert all(f.target == -1 for f in m.features_)  # choice A: features shared by the targets
    assert m.coef_.shape == (2, len(m.features_)) and m.intercept_.shape == (2,)
    P = m.predict(t.X[120:])
    assert P.shape == (40, 2)
    assert r2_per_target(t.y[120:], P).shape == (2,)
    B = FEATKDRegressor(**{**TINY, "targets": "step_contributions"}, random_state=0).fit(t.X[:120], t.y[:120])
    assert {f.target for f in B.features_} <= {0, 1} and all(f.unit == -1 for f in B.features_)


def test_distillation_evolves_every_generation(task, monkeypatch):
    """Issue 40: gplearn's default stopping_criteria (0.0) ended every Pearson-fitness run after generation 1."""
    import gplearn.genetic as genetic

    from trustlab.methods.featkd._distill import GPSettings, TeacherSignal, distil_signal

    made, original = [], genetic.SymbolicRegressor.fit

    def recording_fit(self, X, y, sample_weight=None):
        made.append(self)
        return original(self, X, y, sample_weight)

    monkeypatch.setattr(genetic.SymbolicRegressor, "fit", recording_fit)
    signal = TeacherSignal(0, -1, 0, task.X[:120, 0] * task.X[:120, 1] + 0.1 * task.X[:120, 2])
    distil_signal(task.X[:120], signal, (0, 1, 2), GPSettings(population_size=40, generations=4), 0, 0.0)
    assert len(made) == 1 and len(made[0].run_details_["generation"]) == 4


def test_defaults_are_concise_and_the_claim_setting():
    """Issue 40: the library default is the setting the experiment's claims judge (step contributions: at most
    n_steps features per target), and a first fit in a fresh process equals a later one (torch threads)."""
    from trustlab.experiments.featkd import Config, claim_setting_vs_default

    assert FEATKDRegressor().get_params()["targets"] == "step_contributions"
    assert claim_setting_vs_default(Config())["is_library_default"]
    assert not claim_setting_vs_default(Config.quick())["is_library_default"]
    code = ("from trustlab.methods.featkd import FEATKDRegressor, make_formula_task\n"
            "t = make_formula_task('product_sine', 160, random_state=0)\n"
            f"kw = {TINY!r}\n"
            "h = [FEATKDRegressor(**kw, n_threads=1, random_state=0).fit(t.X[:120], t.y[:120]).formula_hash_ "
            "for _ in range(2)]\n"
            "print(h[0] == h[1])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_predict_without_torch_or_sympy(task, tmp_path):
    m = FEATKDRegressor(**TINY, keep_teacher=False, random_state=0).fit(task.X[:120], task.y[:120])
    path = tmp_path / "m.pkl"
    path.write_bytes(pickle.dumps(m))
    np.save(tmp_path / "X.npy", task.X[120:])
    code = (
        "import sys\n"
        "BLOCKED = {'torch', 'sympy', 'pytorch_tabnet', 'gplearn'}\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ImportError(f'{name} is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pickle, numpy as np\n"
        f"m = pickle.loads(open({str(path)!r}, 'rb').read())\n"
        f"np.save({str(tmp_path / 'P.npy')!r}, m.predict(np.load({str(tmp_path / 'X.npy')!r})))\n"
        "assert not BLOCKED & set(sys.modules), BLOCKED & set(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "P.npy"), m.predict(task.X[120:]))


def test_teacher_checkpoint_round_trip_under_weights_only_default(fitted, task, tmp_path):
    """pytorch-tabnet's own save/load (zip + torch.load) still works under torch >= 2.6."""
    from pytorch_tabnet.tab_model import TabNetRegressor

    path = fitted.teacher_.save_model(str(tmp_path / "teacher"))
    loaded = TabNetRegressor()
    loaded.load_model(path)
    Xs = ((task.X[120:] - fitted.x_mean_) / fitted.x_scale_).astype(np.float32)
    np.testing.assert_allclose(loaded.predict(Xs), fitted.teacher_.predict(Xs), rtol=1e-6)


def test_teacher_baseline_is_the_teacher(fitted, task):
    tb = teacher_baseline(fitted)
    Xs = ((task.X[120:] - fitted.x_mean_) / fitted.x_scale_).astype(np.float32)
    expected = fitted.teacher_.predict(Xs)[:, 0] * fitted.y_scale_[0] + fitted.y_mean_[0]
    np.testing.assert_allclose(tb.predict(task.X[120:]), expected, rtol=1e-6)
    assert tb.n_parameters == fitted.teacher_parameters_


# ------------------------------------------------------------------------------ bad inputs
def test_constant_and_nan_targets(task):
    with pytest.raises(InputError, match="constant in target"):
        FEATKDRegressor(**TINY).fit(task.X[:120], np.full(120, 3.0))
    y = task.y[:120].copy()
    y[5] = np.nan
    with pytest.raises(InputError, match="'y'"):
        FEATKDRegressor(**TINY).fit(task.X[:120], y)
    Y = np.column_stack([task.y[:120], task.y[:120] * 2])
    Y[3, 1] = np.nan
    with pytest.raises(InputError, match="'y'"):
        FEATKDRegressor(**TINY).fit(task.X[:120], Y)


def test_fewer_rows_than_virtual_batch(task):
    with pytest.raises(InputError, match="virtual_batch_size=128"):
        FEATKDRegressor(**{**TINY, "virtual_batch_size": 128}).fit(task.X[:120], task.y[:120])


def test_all_units_dead_is_a_clear_error(task):
    with pytest.raises(TrustlabError, match="dead after the variance filter"):
        FEATKDRegressor(**{**TINY, "variance_threshold": 1e9}).fit(task.X[:120], task.y[:120])


def test_overflowing_formula_is_guarded_and_reported(fitted):
    f = SymbolicFeature(text="1/x0", code="1/x0", variables=(0,), step=0, unit=0, fidelity=1.0, nodes=3,
                        complexity=6, inputs=(0,), low=-2.0, high=2.0, mean=0.0)
    v, rep = f.evaluate(np.array([[0.0], [1e-300], [0.5], [np.nan]]))
    assert np.isfinite(v).all() and rep.n_nonfinite == 2 and rep.n_clipped == 1
    e = SymbolicFeature(text="exp(x0)", code="numpy.exp(x0)", variables=(0,), step=0, unit=0, fidelity=1.0,
                        nodes=2, complexity=5, inputs=(0,), low=0.1, high=7.4, mean=2.0)
    v, rep = e.evaluate(np.array([[1000.0]]))
    assert v[0] == pytest.approx(7.4 + 7.3) and rep.n_nonfinite == 1
    broken = pickle.loads(pickle.dumps(fitted))
    broken.features_ = (f,)
    broken.coef_ = np.array([1.0])
    X = np.zeros((3, 8))
    with pytest.warns(FormulaGuardWarning, match="3 non-finite"):
        out = broken.predict(X)
    assert np.isfinite(out).all() and broken.guard_report(X).n_nonfinite == 3


def test_categorical_columns_get_a_hint(task):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(task.X[:120], columns=[f"c{j}" for j in range(8)])
    df["colour"] = pd.Categorical(["red", "blue"] * 60)
    with pytest.raises(InputError, match="one-hot"):
        FEATKDRegressor(**TINY).fit(df, task.y[:120])


def test_multi_output_rows_must_match(task):
    with pytest.raises(InputError, match="same number of samples"):
        FEATKDRegressor(**TINY).fit(task.X[:120], np.column_stack([task.y[:119], task.y[:119]]))


def test_predict_checks_feature_count(fitted, task):
    with pytest.raises(InputError, match="8 features"):
        fitted.predict(task.X[:5, :7])


# ------------------------------------------------------------------------------ baselines
def test_gplearn_time_budget_adds_generations(task):
    fit = fit_gplearn_on_y(task.X[:120], task.y[:120], time_budget_s=1.0, population_size=50, random_state=0)
    assert fit.info["generations"][0] > 1 and fit.time_s >= 1.0
    assert fit.n_nodes is not None and fit.n_nodes >= 5
    r = fit_ridge(task.X[:120], task.y[:120])
    assert r.n_nodes == 4 * 8 + 1 and np.isfinite(r.score(task.X[120:], task.y[120:]))


def test_registered_as_a_regressor():
    from trustlab.methods import METHODS, discover_methods

    discover_methods()
    assert METHODS.get("FEATKDRegressor") is FEATKDRegressor
    assert METHODS.entry("FEATKDRegressor").meta == {"paper": "featkd", "role": "regressor"}
    assert FEATKDRegressor.get_tags()["role"] == "regressor"


def test_front_plot_draws_one_panel_per_dataset_with_data():
    from trustlab.results.plots import front_plot
    from trustlab.results.result import Result

    res = Result("featkd", "quick", {})
    for ds in ("a", "b"):
        for seed in (0, 1):
            res.add(method="m", dataset=ds, seed=seed, metric="size", value=10.0 + seed)
            res.add(method="m", dataset=ds, seed=seed, metric="r2", value=0.5)
    res.add(method="m", dataset="c", seed=0, metric="r2", value=0.5)  # no size: no panel
    fig = front_plot(res, "size", "r2")
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]


# ------------------------------------------------------------------------------ experiment
@pytest.mark.reproduce
def test_quick_experiment_expected_claims(quick_run):
    from trustlab.experiments.featkd import QUICK_EXPECTED_PASS

    res, _ = quick_run("featkd")
    status = {c.id: c.status for c in res.claims}
    assert all(status[c] == "PASS" for c in QUICK_EXPECTED_PASS), status


def test_premises_void_c1_when_the_teacher_did_not_learn():
    """Issue 39: a teacher at ridge's level (or a formula no better than ridge) voids C1a, C1b and C2."""
    from trustlab.experiments import featkd as exp
    from trustlab.experiments.base import evaluate_claims
    from trustlab.results.result import Result

    assert exp.KNOCKOUT and all("=" in k for k in exp.KNOCKOUT)
    r = Result("featkd", "quick", {"synthetic": ["product_sine"]})
    means = {"FEAT-KD": {"r2": 0.99, "nodes": 20.0, "n_features": 3.0}, "ridge": {"r2": 0.3},
             "TabNet (teacher)": {"r2": 0.8, "parameters": 6000.0}, "gplearn on y": {"r2": 0.2, "nodes": 9.0}}
    r.summary.update(means={"product_sine": means}, determinism={"same_hash": True, "dataset": "d", "seed": 0})
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-teacher-learned"] == st["pre-formula-nontrivial"] == st["C1a"] == st["C1b"] == "PASS"
    means["TabNet (teacher)"]["r2"] = 0.32
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-teacher-learned"] == "FAIL" and st["C1a"] == st["C1b"] == st["C2"] == "VOID" and st["C4"] == "PASS"
    means["FEAT-KD"]["r2"] = 0.31
    assert {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}["pre-formula-nontrivial"] == "FAIL"
