"""Issue 41 tests of trustlab.methods.licensing: perturbed re-submission against the embedded de-duplication
(the done-when test), the tolerance rule, the zero-value payout rule, and owner-level Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError
from trustlab.methods.licensing import (
    Game,
    KNNUtility,
    compensation_report,
    embedded_duplicates,
    largest_remainder,
    split_pool,
    tmc_shapley,
)


@pytest.fixture(scope="module")
def digits():
    from trustlab.data.images import load_digits_images

    ds = load_digits_images(flatten=True)  # pixels / 16: the 0-16 scale of sklearn's digits divided by 16
    idx = np.random.default_rng(0).permutation(len(ds.X))
    X, y = ds.X[idx].astype(np.float64), ds.y[idx]
    return X[:400], y[:400], np.repeat(np.arange(8), 50), X[400:550], y[400:550]


def _resubmit(digits, amplitude_0_16: float, seed: int = 0):
    X, y, owner, Xv, yv = digits
    own = owner == 2
    a = amplitude_0_16 / 16.0
    noise = np.random.default_rng(seed).uniform(-a, a, (int(own.sum()), X.shape[1]))
    return (np.vstack([X, X[own] + noise]), np.concatenate([y, y[own]]),
            np.concatenate([owner, np.full(int(own.sum()), 3)]), Xv, yv)


@pytest.mark.parametrize("amplitude", [0.05, 0.8])
def test_perturbed_resubmission_gains_at_most_two_points(digits, amplitude):
    X, y, owner, Xv, yv = digits
    base = compensation_report(X, y, owner, Xv, yv, 100000, counterfactual=False).owners[3].share
    args = _resubmit(digits, amplitude)
    rep = compensation_report(*args, 100000, dedup="embedded")
    gain_pp = 100 * (rep.owners[3].share - base)
    no_dedup_pp = 100 * (rep.owners[3].share_no_dedup - base)
    assert gain_pp <= 2.0 < no_dedup_pp  # the copies would have paid; the embedded rule finds them
    assert rep.owners[3].n_dup_cross == 50 and rep.dedup_tol is not None
    # the finding: the hash and the max-norm radius at its default tolerance miss every copy
    for mode in ("exact", "near"):
        assert compensation_report(*args, 100000, dedup=mode, counterfactual=False).owners[3].n_dup_cross == 0


def test_embedded_tolerance_follows_the_written_rule(digits):
    from sklearn.decomposition import PCA
    from sklearn.neighbors import NearestNeighbors

    X, y, _, Xv, _ = digits
    g = embedded_duplicates(X, y, Xv, quantile=0.05, variance=0.8)
    p = PCA(0.8, svd_solver="full").fit(X - X.mean(0))
    d = NearestNeighbors(n_neighbors=1).fit(p.transform(X - X.mean(0))).kneighbors(p.transform(Xv - X.mean(0)))[0]
    assert g.tol == pytest.approx(np.quantile(d[d > 0], 0.05), rel=1e-9) and g.n_components == p.n_components_
    assert g.mode == "embedded" and g.n_duplicates <= 0.05 * len(X)  # genuine digits: the false-merge budget
    with pytest.raises(InputError, match="'X_ref'.*features"):
        embedded_duplicates(X, y, Xv[:, :5])
    with pytest.raises(InputError, match="every row in X"):
        embedded_duplicates(X, y, X[:10])
    with pytest.raises(ConfigError, match="quantile"):
        embedded_duplicates(X, y, Xv, quantile=0.0)


def test_far_perturbations_are_not_found_and_the_report_says_how_far_it_looks(digits):
    args = _resubmit(digits, 6.4)  # +-6.4 of 16: a different image in all but outline
    rep = compensation_report(*args, 100000, dedup="embedded")
    assert rep.owners[3].n_dup_cross < 25 and "tolerance" in rep.to_markdown()


# -- the zero-value rule ---------------------------------------------------------------------------------
def test_split_pool_when_nothing_is_left():
    w = np.array([-0.1, -0.2, 0.3])  # a float sum of ~0: the exact sum of these doubles is -2.8e-17
    with pytest.raises(InputError, match="positive sum"):
        largest_remainder(w, 1000)
    r = split_pool(w, 1000, negative="allow")
    assert r.rule == "nothing left: unpaid" and r.unpaid_minor == 1000 and not r.payouts.any() and r.reason
    eq = split_pool(w, 1000, negative="allow", fallback="equal", eligible=[True, True, False])
    assert eq.payouts.tolist() == [500, 500, 0] and eq.unpaid_minor == 0
    with pytest.raises(InputError, match="Nothing is left"):
        split_pool(w, 1000, negative="allow", fallback="raise")
    with pytest.raises(ConfigError, match="fallback"):
        split_pool(w, 1000, fallback="evenly")
    clipped = split_pool(np.array([0.5, -0.2, 0.3]), 800)  # clip: negatives are paid 0, the rest by weight
    assert clipped.payouts.tolist() == [500, 0, 300] and clipped.rule == "proportional"
    assert split_pool(np.array([0.5, 0.5]), 10, gain=-0.1).rule == "nothing left: unpaid"  # data worth < no data
    with pytest.raises(ConfigError, match="fallback"):
        compensation_report(np.eye(4), [0, 1, 0, 1], [0, 0, 1, 1], np.eye(4), [0, 1, 0, 1], 10, k=1, fallback="x")


def test_all_noise_pool_pays_nothing_and_says_so(digits):
    _, _, _, Xv, yv = digits
    rng = np.random.default_rng(5)
    X, y = rng.random((200, Xv.shape[1])), rng.integers(0, 10, 200)
    owner = np.repeat(np.arange(4), 50)
    kw = {"method": "owner_shapley_exact", "utility": "loglik", "counterfactual": False}
    rep = compensation_report(X, y, owner, Xv, yv, 5000, **kw)
    assert rep.v_full - rep.v_empty < 0 and rep.payout_rule == "nothing left: unpaid"
    assert rep.unpaid_minor == rep.pool_minor and sum(o.payout_minor for o in rep.owners) == 0
    eq = compensation_report(X, y, owner, Xv, yv, 5000, fallback="equal", **kw)
    assert [o.payout_minor for o in eq.owners] == [125000] * 4


# -- owner-level Monte Carlo -----------------------------------------------------------------------------
class _Plain(Game):
    """A KNN game without the incremental path: tmc_shapley falls back to one evaluation per prefix."""

    def __init__(self, game):
        super().__init__(game.n_players, {})
        self._g = game

    def _evaluate(self, masks):
        return self._g.values(masks)


def test_incremental_permutations_equal_the_generic_solver():
    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, (80, 2)).astype(float)  # a grid: ties in distance
    y = rng.integers(0, 3, 80)
    Xv, yv = rng.integers(0, 3, (25, 2)).astype(float), rng.integers(0, 3, 25)
    game = KNNUtility(3).game(X, y, Xv, yv, rng.integers(0, 9, 80))
    fast = tmc_shapley(game, n_permutations=30, random_state=0)
    slow = tmc_shapley(_Plain(game), n_permutations=30, random_state=0)
    assert np.max(np.abs(fast.values - slow.values)) <= 1e-12 and np.max(np.abs(fast.se - slow.se)) <= 1e-12


def test_hundreds_of_owners_get_payouts_with_standard_errors(digits):
    X, y, _, Xv, yv = digits
    owner = np.arange(len(X)) % 200  # 200 owners of 2 points each
    rep = compensation_report(X, y, owner, Xv, yv, 100000, method="tmc_shapley", n_samples=60,
                              counterfactual=False)
    assert len(rep.owners) == 200 and sum(o.payout_minor for o in rep.owners) == rep.pool_minor
    se = np.array([o.payout_se_minor for o in rep.owners])
    assert np.all(se >= 0) and np.median(se) > 0
    o = max(rep.owners, key=lambda o: o.payout_minor)
    assert o.payout_se_minor == pytest.approx(o.share_se * rep.pool_minor) and "±" in rep.to_markdown()
    assert abs(rep.efficiency_residual) <= 1e-9
    exact = compensation_report(X, y, owner % 8, Xv, yv, 100000, method="owner_shapley_exact", counterfactual=False)
    assert all(o.share_se is None and o.payout_se_minor is None for o in exact.owners)
