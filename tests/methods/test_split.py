"""SPLIT / LicketySPLIT / RESPLIT: engine vs naive references, the GOSDT oracle, the guarantee chain,
bad inputs, RESPLIT soundness, the binarizer and a curated scikit-learn ``check_estimator``."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.core.exceptions import (
    BudgetExceededError,
    ConfigError,
    ConvergenceWarning,
    InputError,
    NotFittedError,
)
from trustlab.methods.split import (
    RESPLIT,
    GreedyTreeClassifier,
    LicketySPLITClassifier,
    SPLITClassifier,
    ThresholdGuessBinarizer,
    fit_cart,
    tree_objective,
)
from trustlab.methods.split._engine import TOL, Engine, kernels
from trustlab.methods.split._search import LookaheadSolver, greedy_tree, lickety_tree


def _problem(seed: int, n: int = 60, p: int = 5, k: int = 2, noise: float = 0.25):
    rng = np.random.default_rng(seed)
    X = rng.random((n, p)) < rng.uniform(0.2, 0.8, p)
    y = (X[:, 0].astype(int) + (X[:, 1 % p] & X[:, 2 % p]) * (k - 1) + (rng.random(n) < noise)) % k
    y[:k] = np.arange(k)  # every class present
    return X, y


# ------------------------------------------------------------------------------ naive references
def _xlogx(v: int) -> float:
    return v * math.log(v) if v > 0 else 0.0


def _leaf(y: np.ndarray, k: int, lam_n: float) -> float:
    c = np.bincount(y, minlength=k)
    return float((c.sum() - c.max()) + lam_n)


def _ref_best_gain(X: np.ndarray, y: np.ndarray, k: int) -> int:
    """First feature of largest information gain (same arithmetic order as the engine), -1 if none > 0."""
    tot = np.bincount(y, minlength=k)
    st_ = _xlogx(int(tot[0]))
    for c in range(1, k):
        st_ += _xlogx(int(tot[c]))
    up = _xlogx(len(y)) - st_
    best, best_j = -np.inf, -1
    for j in range(X.shape[1]):
        L = np.bincount(y[X[:, j]], minlength=k)
        R = tot - L
        nL, nR = int(L.sum()), int(R.sum())
        if nL == 0 or nR == 0:
            continue
        hL, hR = _xlogx(int(L[0])), _xlogx(int(R[0]))
        for c in range(1, k):
            hL += _xlogx(int(L[c]))
            hR += _xlogx(int(R[c]))
        g = (((up - _xlogx(nL)) - _xlogx(nR)) + hL) + hR
        if g > best:
            best, best_j = g, j
    return best_j if best > 1e-9 else -1


def _ref_greedy(X, y, k, lam_n, depth) -> float:
    leaf = _leaf(y, k, lam_n)
    if depth <= 1 or len(y) == 0:
        return leaf
    j = _ref_best_gain(X, y, k)
    if j < 0:
        return leaf
    m = X[:, j]
    split = _ref_greedy(X[m], y[m], k, lam_n, depth - 1) + _ref_greedy(X[~m], y[~m], k, lam_n, depth - 1)
    return split if split < leaf - TOL else leaf


def _ref_greedy_exact_last(X, y, k, lam_n, depth) -> float:
    leaf = _leaf(y, k, lam_n)
    if depth <= 1 or len(y) == 0:
        return leaf
    if depth == 2:
        best = leaf
        for j in range(X.shape[1]):
            m = X[:, j]
            if m.all() or not m.any():
                continue
            best = min(best, _leaf(y[m], k, lam_n) + _leaf(y[~m], k, lam_n))
        return best
    j = _ref_best_gain(X, y, k)
    if j < 0:
        return leaf
    m = X[:, j]
    split = (_ref_greedy_exact_last(X[m], y[m], k, lam_n, depth - 1)
             + _ref_greedy_exact_last(X[~m], y[~m], k, lam_n, depth - 1))
    return split if split < leaf - TOL else leaf


def _ref_lookahead(X, y, k, lam_n, b, g) -> float:
    """Best prefix of budget b whose budget-1 nodes are valued by greedy completions of depth g."""
    if b <= 1:
        return _ref_greedy(X, y, k, lam_n, g)
    best = _leaf(y, k, lam_n)
    for j in range(X.shape[1]):
        m = X[:, j]
        if m.all() or not m.any():
            continue
        v = _ref_lookahead(X[m], y[m], k, lam_n, b - 1, g) + _ref_lookahead(X[~m], y[~m], k, lam_n, b - 1, g)
        best = min(best, v)
    return best


def _ref_lickety(X, y, k, lam_n, b) -> float:
    leaf = _leaf(y, k, lam_n)
    if b <= 1:
        return leaf
    best, best_j = leaf, -1
    for j in range(X.shape[1]):
        m = X[:, j]
        if m.all() or not m.any():
            continue
        v = _ref_greedy(X[m], y[m], k, lam_n, b - 1) + _ref_greedy(X[~m], y[~m], k, lam_n, b - 1)
        if v < best - TOL:
            best, best_j = v, j
    if best_j < 0:
        return leaf
    m = X[:, best_j]
    return _ref_lickety(X[m], y[m], k, lam_n, b - 1) + _ref_lickety(X[~m], y[~m], k, lam_n, b - 1)


@pytest.mark.parametrize("seed", range(12))
def test_engine_matches_naive_references(seed):
    rng = np.random.default_rng(100 + seed)
    k = int(rng.choice([2, 3]))
    X, y = _problem(seed, n=int(rng.integers(8, 50)), p=int(rng.integers(1, 5)), k=k)
    lam = float(rng.choice([0.0, 0.01, 0.05]))
    eng = Engine(X, y, k, lam)
    lam_n = lam * len(y)
    for d in (1, 2, 3):
        assert math.isclose(eng.greedy_values(eng.root, d)[0], _ref_greedy(X, y, k, lam_n, d), abs_tol=1e-9)
        assert math.isclose(tree_objective(lickety_tree(eng, eng.root, d), X, y, lam) * len(y),
                            _ref_lickety(X, y, k, lam_n, d), abs_tol=1e-9)
        for dl in range(1, d + 1):
            v, _ = LookaheadSolver(eng, frontier_depth=d - dl + 1).solve(eng.root, dl)
            assert math.isclose(v, _ref_lookahead(X, y, k, lam_n, dl, d - dl + 1), abs_tol=1e-9)
        ex = Engine(X, y, k, lam, exact_last=True)
        v = ex.greedy_values(ex.root, d)[0]
        assert math.isclose(v, _ref_greedy_exact_last(X, y, k, lam_n, d), abs_tol=1e-9)
        assert v <= _ref_greedy(X, y, k, lam_n, d) + 1e-9
        assert math.isclose(tree_objective(greedy_tree(ex, ex.root, d), X, y, lam) * len(y), v, abs_tol=1e-9)


def test_branch_and_bound_depth_5_matches_exhaustive_reference():
    X, y = _problem(3, n=40, p=4)
    eng = Engine(X, y, 2, 0.01)
    s = LookaheadSolver(eng, frontier_depth=1)
    v, tree = s.tree(eng.root, 5)
    assert s.expanded > 0  # the recursive (memo + bound) level ran, not only the batch levels
    assert math.isclose(v, _ref_lookahead(X, y, 2, 0.01 * 40, 5, 1), abs_tol=1e-9)
    assert math.isclose(tree_objective(tree, X, y, 0.01) * 40, v, abs_tol=1e-9)


@pytest.mark.skipif(kernels() is None, reason="numba not installed")
def test_numba_and_numpy_paths_agree():
    for seed in range(6):
        X, y = _problem(seed, n=150, p=9, k=2 + seed % 2)
        outs = []
        for use in (True, False):
            eng = Engine(X, y, 2 + seed % 2, 0.01, use_numba=use)
            C = np.stack([eng.root] + [eng.root & eng.X[j] for j in range(eng.p)])
            j, ok = eng.best_gain(C)
            outs.append((j[ok].tolist(), ok.tolist(), eng.best_leaf_split(C)[0].tolist(),
                         eng.left_counts(C).tolist(), lickety_tree(eng, eng.root, 4).canonical(),
                         LookaheadSolver(eng, 2).tree(eng.root, 3)[1].canonical()))
        assert outs[0] == outs[1]


# ------------------------------------------------------------------------------ GOSDT oracle
def test_exact_mode_equals_gosdt_on_20_tiny_problems():
    pytest.importorskip("gosdt")
    from trustlab.methods.split import fit_gosdt

    rng = np.random.default_rng(2024)
    for t in range(20):
        n, p, d = int(rng.integers(20, 201)), int(rng.integers(2, 11)), int(rng.integers(2, 5))
        lam = float(rng.choice([0.005, 0.01, 0.02, 0.05]))
        X, y = _problem(1000 + t, n=n, p=p)
        ours = SPLITClassifier(depth_budget=d, lookahead_depth=d, reg=lam, binarize=False).fit(X.astype(int), y)
        g = fit_gosdt(X, y, reg=lam, depth_budget=d, time_limit=30)
        assert g.converged
        assert abs(ours.objective_ - g.objective) <= 1e-5, (t, ours.objective_, g.objective)
        assert abs(g.info["upper_bound"] - g.objective) <= 1e-5
        assert ours.depth_ <= d


# ------------------------------------------------------------------------------ guarantee chain
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(2, 4), lam=st.sampled_from([0.0, 0.005, 0.02, 0.1]),
       k=st.sampled_from([2, 3]))
def test_guarantee_chain_property(seed, d, lam, k):
    X, y = _problem(seed, n=80, p=6, k=k)
    Xi = X.astype(int)
    exact = SPLITClassifier(depth_budget=d, lookahead_depth=d, reg=lam, binarize=False).fit(Xi, y).objective_
    greedy = GreedyTreeClassifier(depth_budget=d, reg=lam, binarize=False).fit(Xi, y).objective_
    lick = LicketySPLITClassifier(depth_budget=d, reg=lam, binarize=False).fit(Xi, y).objective_
    lick_x = LicketySPLITClassifier(depth_budget=d, reg=lam, completion="exact_last", binarize=False).fit(Xi, y)
    assert lick <= greedy + 1e-12 and lick_x.objective_ <= greedy + 1e-12
    if d == 3:  # with an exact last level, one step of lookahead at depth 3 is the exact optimum
        assert math.isclose(lick_x.objective_, exact)
    for dl in range(2, d + 1):
        opt = SPLITClassifier(depth_budget=d, lookahead_depth=dl, reg=lam, binarize=False).fit(Xi, y)
        gre = SPLITClassifier(depth_budget=d, lookahead_depth=dl, reg=lam, refill="greedy", binarize=False).fit(Xi, y)
        prefix = opt.fit_info_["prefix_objective"]
        assert exact - 1e-12 <= opt.objective_ <= gre.objective_ + 1e-12
        assert gre.objective_ <= prefix + 1e-12 <= greedy + 2e-12
        assert opt.depth_ <= d and gre.depth_ <= d


# ------------------------------------------------------------------------------ estimator behaviour
def test_dataframe_names_binarizer_and_export_text():
    pd = pytest.importorskip("pandas")
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer(as_frame=True)
    X, y = data.data, data.target
    clf = SPLITClassifier(depth_budget=3, lookahead_depth=2, reg=0.01, random_state=0).fit(X, y)
    assert list(clf.feature_names_in_) == list(X.columns)
    assert clf.binarizer_ is not None and all(" <= " in s for s in clf.binary_feature_names_)
    text = clf.export_text()
    assert "if [" in text and "predict" in text and any(c in text for c in X.columns)
    assert clf.score(X, y) > 0.9
    assert math.isclose(clf.objective_, tree_objective(clf.tree_, clf.transform_binary(X),
                                                       np.searchsorted(clf.classes_, y), 0.01))
    with pytest.raises(InputError, match="feature names"):
        clf.predict(X[list(reversed(X.columns))])
    with pytest.raises(InputError, match="features"):
        clf.predict(X.iloc[:, :5].to_numpy())
    assert isinstance(X, pd.DataFrame)


def test_multiclass_string_labels_and_proba():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    for est in (SPLITClassifier(depth_budget=4, lookahead_depth=3, reg=0.01, random_state=0),
                LicketySPLITClassifier(depth_budget=4, reg=0.01, random_state=0)):
        est.fit(X, labels)
        P = est.predict_proba(X)
        assert P.shape == (150, 3) and np.allclose(P.sum(1), 1.0)
        assert set(est.predict(X)) <= set(labels) and est.score(X, labels) > 0.9
        assert "virginica" in est.export_text()
        est2 = pickle.loads(pickle.dumps(est))
        assert np.array_equal(est2.predict_proba(X), P)


def test_bad_inputs_and_parameters():
    X, y = _problem(0, n=50, p=4)
    Xi = X.astype(int)
    with pytest.raises(InputError, match="binarize=False"):
        SPLITClassifier(binarize=False).fit(Xi + 0.5, y)
    with pytest.raises(InputError, match="finite"):
        SPLITClassifier().fit(np.where(Xi == 1, np.nan, 0.0), y)
    with pytest.raises(InputError, match="2 classes"):  # the foundation refuses one class before _fit
        SPLITClassifier().fit(Xi, np.zeros(50, dtype=int))
    with pytest.raises(ConfigError, match="The 'depth_budget' parameter of SPLITClassifier must be"):
        SPLITClassifier(depth_budget=0).fit(Xi, y)
    with pytest.raises(ConfigError, match="The 'reg' parameter of LicketySPLITClassifier must be"):
        LicketySPLITClassifier(reg=-0.1).fit(Xi, y)
    with pytest.raises(ConfigError, match="lookahead_depth.*<= depth_budget"):
        SPLITClassifier(depth_budget=3, lookahead_depth=4).fit(Xi, y)
    with pytest.raises(ConfigError, match="The 'refill' parameter"):
        SPLITClassifier(refill="best").fit(Xi, y)
    with pytest.warns(UserWarning, match="no lookahead"):
        SPLITClassifier(depth_budget=3, lookahead_depth=1, binarize=False).fit(Xi, y)
    with pytest.warns(UserWarning, match="single leaf"):
        GreedyTreeClassifier(reg=0.6, binarize=False).fit(Xi, y)
    clf = SPLITClassifier(depth_budget=3, binarize=False).fit(Xi, y)
    with pytest.raises(InputError, match="0/1"):
        clf.predict(Xi * 2.0)
    with pytest.raises(InputError, match="4 features"):
        clf.predict(Xi[:, :3])
    with pytest.raises(NotFittedError):
        SPLITClassifier().predict(Xi)
    with pytest.raises(InputError, match="extra arguments"):
        SPLITClassifier(binarize=False).fit(Xi, y, sample_weight=np.ones(50))


def test_lookahead_one_is_exact_or_greedy():
    X, y = _problem(5, n=120, p=7)
    Xi = X.astype(int)
    exact = SPLITClassifier(depth_budget=4, lookahead_depth=4, reg=0.005, binarize=False).fit(Xi, y).objective_
    greedy = GreedyTreeClassifier(depth_budget=4, reg=0.005, binarize=False).fit(Xi, y).objective_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        one_opt = SPLITClassifier(depth_budget=4, lookahead_depth=1, reg=0.005, binarize=False).fit(Xi, y)
        one_gre = SPLITClassifier(depth_budget=4, lookahead_depth=1, reg=0.005, refill="greedy",
                                  binarize=False).fit(Xi, y)
    assert math.isclose(one_opt.objective_, exact) and math.isclose(one_gre.objective_, greedy)


def test_time_limit_fallbacks(monkeypatch):
    X, y = _problem(7, n=200, p=10)
    Xi = X.astype(int)
    with pytest.warns(ConvergenceWarning, match="prefix search"):
        clf = SPLITClassifier(depth_budget=5, lookahead_depth=5, time_limit=1e-9, binarize=False).fit(Xi, y)
    greedy = GreedyTreeClassifier(depth_budget=5, reg=0.01, binarize=False).fit(Xi, y)
    assert clf.fit_info_["search_timed_out"] and clf.fit_info_["fallback"] == "greedy"
    assert math.isclose(clf.objective_, greedy.objective_)

    from trustlab.methods.split import _split
    from trustlab.methods.split._engine import SearchTimeout

    def boom(self, C, b):
        raise SearchTimeout

    monkeypatch.setattr(_split.LookaheadSolver, "tree", boom)  # only the refill calls .tree
    with pytest.warns(ConvergenceWarning, match="refilled greedily"):
        clf = SPLITClassifier(depth_budget=5, lookahead_depth=2, binarize=False).fit(Xi, y)
    ref = SPLITClassifier(depth_budget=5, lookahead_depth=2, refill="greedy", binarize=False).fit(Xi, y)
    assert clf.fit_info_["refill_timed_out"] and clf.fit_info_["n_refilled_optimally"] == 0
    assert math.isclose(clf.objective_, ref.objective_)


# ------------------------------------------------------------------------------ RESPLIT
def _all_trees(X, y, k, lam_n, b):
    """Every tree of budget b as (value, canonical) on a tiny problem (brute force)."""
    c = np.bincount(y, minlength=k)
    out = [(float((c.sum() - c.max()) + lam_n), f"L{int(np.argmax(c))}")]
    if b > 1:
        for j in range(X.shape[1]):
            m = X[:, j]
            if m.all() or not m.any():
                continue
            for va, sa in _all_trees(X[m], y[m], k, lam_n, b - 1):
                for vb, sb in _all_trees(X[~m], y[~m], k, lam_n, b - 1):
                    out.append((va + vb, f"({j} {sa} {sb})"))
    return out


@pytest.mark.parametrize("fill", ["rashomon", "optimal", "greedy"])
def test_resplit_sound_distinct_and_lazy(fill):
    X, y = _problem(11, n=70, p=5)
    Xi = X.astype(int)
    rs = RESPLIT(depth_budget=3, lookahead_depth=2, reg=0.02, rashomon_mult=0.15, fill=fill,
                 binarize=False).fit(Xi, y)
    trees = list(rs.iter_trees())
    assert len(trees) == rs.n_trees_ >= 1
    canon = [t.canonical() for t in trees]
    assert len(set(canon)) == len(canon)
    R = np.array([tree_objective(t, X, y, 0.02) for t in trees])
    assert R.max() <= rs.rashomon_bound_ + 1e-12 and math.isclose(R.max(), rs.max_objective_)
    assert math.isclose(R.min(), rs.min_objective_) and math.isclose(rs.objective_, R.min())
    assert np.allclose(R, [rs.objective_at(i) for i in range(rs.n_trees_)], atol=1e-12)
    brute = {s for v, s in _all_trees(X, y, 2, 0.02 * 70, 3) if v <= rs.rashomon_bound_ * 70 + 1e-9}
    assert set(canon) <= brute  # every enumerated tree is in the exact Rashomon set with the same bound
    if fill == "rashomon":  # with d_l = d - 1 every frontier subtree within its greedy bound is listed
        assert rs.n_trees_ >= 1
    with pytest.raises(ConfigError, match=r"The 'i' argument of RESPLIT.tree_at must be an int in \[0, "):
        rs.tree_at(rs.n_trees_)
    with pytest.raises(ConfigError, match="Got 1.5 instead"):  # issue 15: 1.5 used to give tree 1
        rs.tree_at(1.5)
    with pytest.raises(ConfigError, match="objective_at"):
        rs.objective_at(-1)
    rs2 = pickle.loads(pickle.dumps(rs))
    assert rs2.tree_at(rs.n_trees_ - 1).canonical() == canon[-1]


def test_resplit_refuses_large_sets_and_bad_bounds():
    X, y = _problem(12, n=80, p=6)
    Xi = X.astype(int)
    with pytest.raises(BudgetExceededError, match="max_models"):
        RESPLIT(depth_budget=3, lookahead_depth=2, reg=0.0, rashomon_mult=5.0, max_models=3, binarize=False).fit(Xi, y)
    with pytest.raises(ConfigError, match="Exactly one"):
        RESPLIT(rashomon_mult=0.1, rashomon_add=0.01, binarize=False).fit(Xi, y)
    with pytest.raises(ConfigError, match="Exactly one"):
        RESPLIT(rashomon_mult=None, rashomon_add=None, binarize=False).fit(Xi, y)
    rs = RESPLIT(depth_budget=3, lookahead_depth=2, reg=0.01, rashomon_mult=None, rashomon_add=0.02,
                 binarize=False).fit(Xi, y)
    assert math.isclose(rs.rashomon_bound_, rs.reference_objective_ + 0.02)


def test_resplit_is_subset_of_treefarms():
    pytest.importorskip("treefarms")
    from trustlab.methods.split import fit_treefarms

    X, y = _problem(13, n=120, p=6, noise=0.2)
    rs = RESPLIT(depth_budget=3, lookahead_depth=2, reg=0.02, rashomon_mult=0.1, binarize=False).fit(X.astype(int), y)
    tf = fit_treefarms(X, y, reg=0.02, depth_budget=3, rashomon_mult=0.1)
    ours = {t.canonical() for t in rs.iter_trees()}
    assert ours <= set(tf.info["canonical"])


# ------------------------------------------------------------------------------ binarizer, baselines
def test_threshold_guess_binarizer():
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    with pytest.raises(NotFittedError):
        ThresholdGuessBinarizer().transform(X)
    enc = ThresholdGuessBinarizer(n_estimators=30, random_state=0, drop_redundant=False).fit(X, y == 1)
    B = enc.transform(X)
    assert B.shape == (178, enc.n_features_out_) and set(np.unique(B)) <= {0, 1}
    j, t = enc.thresholds_[0]
    assert np.array_equal(B[:, 0], (X[:, j] <= t).astype(np.uint8))
    assert len(enc.get_feature_names_out()) == enc.n_features_out_
    red = ThresholdGuessBinarizer(n_estimators=30, random_state=0).fit(X, y == 1)
    assert red.n_features_out_ <= enc.n_features_out_
    ce = ThresholdGuessBinarizer(n_estimators=10, column_elimination=True, random_state=0).fit(X, y == 1)
    assert 1 <= ce.n_features_out_ <= ThresholdGuessBinarizer(n_estimators=10, random_state=0).fit(X, y == 1).n_features_out_
    with pytest.raises(InputError, match="13 features"):
        enc.transform(X[:, :5])
    with pytest.raises(ConfigError, match="n_estimators"):
        ThresholdGuessBinarizer(n_estimators=0).fit(X, y)


def test_baselines_rescored():
    X, y = _problem(21, n=150, p=7)
    cart = fit_cart(X, y, reg=0.01, depth_budget=4)
    assert math.isclose(cart.objective, tree_objective(cart.tree, X, y, 0.01)) and cart.tree.depth <= 4
    assert np.array_equal(cart.predict(X), cart.tree.predict(X))
    if pytest.importorskip("licketysplit"):
        from trustlab.methods.split import fit_licketysplit_package

        for t in range(8):  # same algorithm as the package when the last level is exact
            X, y = _problem(40 + t, n=200, p=9, k=2 + t % 2)
            d = 3 + t % 3
            pkg = fit_licketysplit_package(X, y, reg=0.005, depth_budget=d)
            ours = LicketySPLITClassifier(depth_budget=d, reg=0.005, completion="exact_last",
                                          binarize=False).fit(X.astype(int), y)
            assert math.isclose(pkg.objective, pkg.info["package_objective"], abs_tol=1e-9)
            assert math.isclose(ours.objective_, pkg.objective, abs_tol=1e-9), (t, ours.objective_, pkg.objective)


# ------------------------------------------------------------------------------ scikit-learn
# Failures that come from the foundation's shared validation (trustlab.core), not from this package:
# its own NotFittedError/messages/dtype rules differ from scikit-learn's regexes. Reported upstream.
_FOUNDATION_XFAIL = {
    "check_estimators_unfitted": "trustlab NotFittedError is not sklearn's NotFittedError subclass",
    "check_n_features_in_after_fitting": "trustlab's feature-count message differs from sklearn's",
    "check_complex_data": "trustlab.core.validation accepts complex dtype",
    "check_dtype_object": "trustlab.core.validation refuses object arrays of mixed types differently",
    "check_estimators_empty_data_messages": "trustlab's 0-feature message differs from sklearn's",
    "check_estimator_sparse_tag": "trustlab.core.validation's sparse message",
    "check_estimator_sparse_array": "trustlab.core.validation's sparse message",
    "check_estimator_sparse_matrix": "trustlab.core.validation's sparse message",
    "check_classifiers_regression_target": "the Predictor role does not reject continuous targets",
    "check_supervised_y_2d": "the Predictor role ravels a column y without a DataConversionWarning",
    "check_fit2d_1sample": "the Predictor role's one-class message",
    "check_fit2d_predict1d": "trustlab's 1-d message says 'Reshape a single feature', not 'Reshape your data'",
    "check_requires_y_none": "trustlab's y=None message differs from sklearn's",
}


def test_sklearn_check_estimator_curated():
    from sklearn.utils.estimator_checks import check_estimator

    est = SPLITClassifier(depth_budget=3, lookahead_depth=2, random_state=0,
                          binarizer=ThresholdGuessBinarizer(n_estimators=10, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, expected_failed_checks=_FOUNDATION_XFAIL, on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed, failed


# ------------------------------------------------------------------------------ experiment
@pytest.mark.reproduce
def test_quick_experiment_runs_and_round_trips(quick_run):
    from trustlab.results.result import Result

    res, path = quick_run("split")
    assert path is not None and Result.load(path).to_dict() == res.to_dict()
    # the 60 s quick budget is a target, never an assert: it is recorded, and a busy machine only flags it
    prov = res.provenance
    assert prov["budget_s"] == 60 and isinstance(prov["within_budget"], bool)
    assert prov["within_budget"] == (prov["timed_s"] <= prov["budget_s"])
    assert {c.id for c in res.claims} >= {"split-speed", "split-gap", "guarantee-chain"}
    assert res.summary["chain"]["violations"] == []


# ------------------------------------------------------------------------------ issue 15 / 31 regressions
def test_all_constant_features_give_the_single_leaf_tree():
    X, y = np.ones((40, 3)), np.arange(40) % 2
    for est in (SPLITClassifier(depth_budget=3), LicketySPLITClassifier(depth_budget=3),
                GreedyTreeClassifier(depth_budget=3), RESPLIT(depth_budget=3, lookahead_depth=2),
                SPLITClassifier(depth_budget=3, lookahead_depth=3, binarize=False)):
        est.fit(X * 3.0 if est.binarize == "auto" else X, y)
        assert est.n_leaves_ == 1 and est.tree_.is_leaf
        np.testing.assert_allclose(est.predict_proba(X[:2]), 0.5)
    assert RESPLIT(depth_budget=3, lookahead_depth=2).fit(X * 3.0, y).n_trees_ == 1


def test_finite_float64_values_beyond_float32_are_binarized_like_the_scaled_data():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[:150], y[:150]
    ref = SPLITClassifier(depth_budget=3, random_state=0).fit(X, y)
    for factor in (1e300, 1e-300):
        big = SPLITClassifier(depth_budget=3, random_state=0).fit(X * factor, y)
        assert big.tree_.canonical() == ref.tree_.canonical()
        np.testing.assert_array_equal(big.predict(X * factor), ref.predict(X))


def test_continuous_y_and_complex_X_are_refused():
    X = np.random.default_rng(0).normal(size=(30, 3))
    with pytest.raises(InputError, match="must hold class labels.*30 distinct floats"):
        SPLITClassifier(depth_budget=3).fit(X, np.linspace(0, 1, 30))
    SPLITClassifier(depth_budget=3).fit(X, (X[:, 0] > 0).astype(float))  # whole-number floats are labels
    with pytest.raises(InputError, match="real numbers"):
        SPLITClassifier(depth_budget=3).fit(X + 1j, np.arange(30) % 2)
    with pytest.raises(InputError, match="real numbers"):
        ThresholdGuessBinarizer().fit(X + 1j, np.arange(30) % 2)


def test_pipeline_passes_binary_column_names_to_the_tree():
    import pandas as pd
    from sklearn.datasets import load_breast_cancer
    from sklearn.pipeline import make_pipeline

    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    pipe = make_pipeline(ThresholdGuessBinarizer(random_state=0), SPLITClassifier(depth_budget=3)).fit(X, y)
    text = pipe[-1].export_text()
    assert text == SPLITClassifier(depth_budget=3, random_state=0).fit(X, y).export_text()
    assert "[worst concave points <= " in text and "[x" not in text
    assert pipe.score(X, y) > 0.9
    enc = ThresholdGuessBinarizer(random_state=0).fit(X, y)
    assert isinstance(enc.transform(X), pd.DataFrame) and isinstance(enc.transform(X.to_numpy()), np.ndarray)
    assert isinstance(ThresholdGuessBinarizer(output="numpy").fit(X, y).transform(X), np.ndarray)
    assert isinstance(ThresholdGuessBinarizer(output="pandas").fit(X, y).transform(X.to_numpy()), pd.DataFrame)


def test_baseline_wrappers_refuse_bad_arguments():
    Xb, y = np.zeros((4, 2), dtype=int), np.array([0, 1, 0, 1])
    with pytest.raises(ConfigError, match="The 'reg' argument of fit_cart must be"):
        fit_cart(Xb, y, reg=-1.0, depth_budget=3)
    with pytest.raises(InputError, match="The 'Xb' argument of fit_cart must be"):
        fit_cart(Xb + 2, y, reg=0.01, depth_budget=3)
    with pytest.raises(InputError, match="same number of samples"):
        fit_cart(Xb, y[:3], reg=0.01, depth_budget=3)
    with pytest.raises(InputError, match="same number of rows"):
        tree_objective(fit_cart(Xb, y, reg=0.01, depth_budget=3).tree, Xb, y[:3], 0.01)
