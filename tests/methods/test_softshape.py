"""SoftShape (issue 7): sparsification mechanics, bad inputs, protocols, aeon's estimator checks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("aeon")

from trustlab.core.exceptions import ConfigError, InputError, NotFittedError  # noqa: E402
from trustlab.core.threads import limit_threads  # noqa: E402
from trustlab.methods.softshape import (  # noqa: E402
    InceptionTimeLite,
    SoftShapeClassifier,
    mask_top_steps,
    p2_splits,
)
from trustlab.methods.softshape._interpret import tokens_to_steps  # noqa: E402
from trustlab.methods.softshape._model import SoftShapeNet, soft_sparsify  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    with limit_threads(1):
        yield


TINY = dict(shape_size=6, stride=2, d_model=8, epochs=4, warm_up_epochs=2, patience=2, random_state=0)


def _data(n=16, T=24, n_classes=2, channels=1, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = rng.normal(scale=0.3, size=(n, channels, T))
    X[:, :, 8:14] += y[:, None, None] * 2.0
    return X, y


# -- mechanics ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("M", [7, 8, 30])
def test_layer2_holds_ceil_half_plus_one_tokens_after_warm_up(M):
    T = (M - 1) * 4 + 32
    net = SoftShapeNet(1, T, 3, shape_size=32, stride=4, d_model=16).eval()
    assert net.n_tokens == M
    x = torch.randn(5, 1, T)
    with torch.no_grad():
        _, aux_warm, info_warm = net(x, warm=True)
        _, aux, info = net(x, warm=False)
    assert info_warm.n_tokens == [M, M] and float(aux_warm) == 0.0  # warm-up: no sparsification, no MoE
    assert info.n_tokens == [M, math.ceil(0.5 * M) + 1]
    assert info.positions[-1].shape == (5, math.ceil(0.5 * M) + 1)
    assert (info.positions[-1][:, -1] == -1).all()  # the merged token is last


def test_merged_token_is_score_weighted_sum_of_dropped_tokens():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(4, 9, 6, generator=g, dtype=torch.float64)
    s = torch.rand(4, 9, 1, generator=g, dtype=torch.float64)
    out, kept_idx, dropped = soft_sparsify(h, s, k=5, merge=True)
    assert out.shape == (4, 6, 6)
    for b in range(4):
        d = dropped[b]
        expect = (s[b, d] * h[b, d]).sum(0)
        assert torch.allclose(out[b, -1], expect, atol=1e-6)
        assert torch.all(kept_idx[b][1:] > kept_idx[b][:-1])  # temporal order
        top = torch.topk(s[b, :, 0], 5).indices.sort().values
        assert torch.equal(kept_idx[b], top)
        assert torch.allclose(out[b, :-1], (h[b] * s[b])[kept_idx[b]], atol=1e-12)
    hard, _, _ = soft_sparsify(h, s, k=5, merge=False)
    assert hard.shape == (4, 5, 6)


def test_scores_lie_strictly_between_zero_and_one():
    X, y = _data()
    clf = SoftShapeClassifier(**TINY).fit(X, y)
    info = clf.forward_info(X)
    for s in info.scores + [info.end_scores]:
        assert torch.all(s > 0) and torch.all(s < 1)
    steps = clf.shape_scores(X)
    assert steps.shape == (16, 24) and np.all(steps >= 0) and np.all(steps < 1)


def test_tokens_to_steps_averages_covering_shapes():
    w = np.array([[1.0, 3.0]])
    out = tokens_to_steps(w, shape_size=4, stride=2, n_timepoints=7)
    np.testing.assert_allclose(out, [[1, 1, 2, 2, 3, 3, 0]])


def test_mask_top_steps_zeroes_the_highest_scores():
    X = np.ones((2, 1, 10))
    scores = np.tile(np.arange(10.0), (2, 1))
    out = mask_top_steps(X, scores, 0.2)
    assert (out[:, 0, 8:] == 0).all() and (out[:, 0, :8] == 1).all() and (X == 1).all()


def test_univariate_and_multivariate_fit_predict():
    for channels in (1, 3):
        X, y = _data(channels=channels, n_classes=3, n=18)
        for mode in ("independent", "mixed"):
            clf = SoftShapeClassifier(**TINY, channels=mode).fit(X, y)
            P = clf.predict_proba(X)
            assert P.shape == (18, 3) and np.allclose(P.sum(1), 1)
            assert clf.network_.n_channels == channels
            # independent: one shared embedding of single channels; mixed: one Conv1d over all channels
            assert clf.network_.embed.in_channels == (1 if mode == "independent" else channels)
            steps = clf.shape_scores(X[:4], per_channel=True)
            assert steps.shape == (4, channels, 24) and np.allclose(clf.shape_scores(X[:4]), steps.max(axis=1))
            n_tok = clf.token_scores(X[:4]).shape[1]
            assert n_tok == clf.n_tokens_ * (channels if mode == "independent" else 1)


def test_univariate_input_is_identical_in_both_channel_modes():
    X, y = _data()
    a = SoftShapeClassifier(**TINY, channels="independent").fit(X, y).predict_proba(X)
    b = SoftShapeClassifier(**TINY, channels="mixed").fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_independent_channels_see_a_shape_in_whichever_channel_it_appears():
    """A shape planted in channel 0 or 1 gives the same channel-free tokens (before the channel embedding)."""
    net = SoftShapeNet(2, 40, 2, shape_size=8, stride=4, d_model=16, channels="independent").eval()
    x = torch.zeros(1, 2, 40)
    x[0, 0, 8:16] = 1.0
    x_swapped = x.flip(1)
    with torch.no_grad():
        a = net._tokens(x).reshape(2, net.n_tokens, 16)
        b = net._tokens(x_swapped).reshape(2, net.n_tokens, 16)
    assert torch.allclose(a[0], b[1]) and torch.allclose(a[1], b[0])


def test_gelu_after_every_layer_and_instance_norm_in_the_token_inception_branch():
    net = SoftShapeNet(1, 64, 2, shape_size=8, stride=4, d_model=16)
    assert all(layer.inception.bn is None and layer.inception.norm == "instance" for layer in net.layers)
    from trustlab.methods.softshape._model import InceptionTimeNet

    assert InceptionTimeNet(1, 2, n_filters=4).blocks[0].norm == "batch"


def test_same_seed_same_output_and_global_rng_untouched():
    X, y = _data()
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = SoftShapeClassifier(**TINY).fit(X, y).predict_proba(X)
    after = torch.rand(1)
    b = SoftShapeClassifier(**TINY).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert torch.equal(before, after)


def test_history_and_early_stopping():
    X, y = _data(n=20)
    clf = SoftShapeClassifier(**{**TINY, "epochs": 40, "warm_up_epochs": 3, "patience": 1}).fit(X, y)
    h = clf.history_
    assert h.n_epochs <= 40 and h.best_epoch >= 3  # model selection after warm-up
    assert len(h.epoch_time) == h.n_epochs and not np.isnan(h.mean_epoch_time(False))


def test_inception_time_lite_learns_a_separable_problem():
    X, y = _data(n=24)
    clf = InceptionTimeLite(n_filters=4, kernel_size=8, epochs=30, patience=30, random_state=0).fit(X, y)
    assert clf.predict_proba(X).shape == (24, 2)
    assert np.mean(clf.predict(X) == y) >= 0.8


# -- bad inputs -----------------------------------------------------------------------------------------------
def test_series_shorter_than_shape_size_is_clamped_and_length_one_raises():
    X, y = _data(T=5)
    clf = SoftShapeClassifier(**{**TINY, "shape_size": 32}).fit(X, y)
    assert clf.shape_size_ == 5 and clf.n_tokens_ == 1
    with pytest.raises(InputError, match="at least 2 time points"):
        SoftShapeClassifier(**TINY).fit(X[:, :, :1], y)


def test_variable_length_input_raises_a_clear_error():
    X, y = _data()
    ragged = [X[i, :, : 20 + (i % 3)] for i in range(len(X))]
    with pytest.raises(InputError, match="unequal length.*pad='auto'"):
        SoftShapeClassifier(**TINY).fit(ragged, y)


def test_pad_auto_pads_to_the_longest_training_series_with_aeons_padder():
    X, y = _data()
    ragged = [X[i, :, : 20 + (i % 3)] for i in range(len(X))]
    ragged[0] = ragged[0].copy()
    ragged[0][0, 2] = np.nan  # NaN survives padding and gets the training-mean fill
    clf = SoftShapeClassifier(**TINY, pad="auto").fit(ragged, y)
    assert clf.padder_ is not None and clf.preprocess(ragged).shape == (16, 1, 22)
    assert clf.predict(ragged[:3]).shape == (3,) and clf.predict(X[:2, :, :10]).shape == (2,)
    with pytest.raises(InputError, match="longer than the padded length .22 steps: the longest training series"):
        clf.predict(X[:2])  # 24 steps > 22
    # equal-length input with pad='auto' gives the same model as without padding
    a = SoftShapeClassifier(**TINY, pad="auto").fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, SoftShapeClassifier(**TINY).fit(X, y).predict_proba(X))
    InceptionTimeLite(n_filters=4, kernel_size=8, epochs=2, pad="auto", random_state=0).fit(ragged, y)
    fixed = SoftShapeClassifier(**TINY, pad=24).fit(ragged, y)  # a fixed padded length admits longer test series
    assert fixed.preprocess(X[:2]).shape == (2, 1, 24)


def test_nan_is_filled_with_the_training_mean_only():
    X, y = _data()
    Xn = X.copy()
    Xn[0, 0, 3] = np.nan
    clf = SoftShapeClassifier(**TINY).fit(Xn, y)
    expected = np.mean(np.delete(X[:, 0, 3], 0))
    assert clf.train_mean_[0, 3] == pytest.approx(expected)
    Xt = X[:3].copy()
    Xt[:, 0, 3] = np.nan  # test-time NaN uses the training mean, never test statistics
    filled = Xt.copy()
    filled[:, 0, 3] = expected
    np.testing.assert_allclose(clf.predict_proba(Xt), clf.predict_proba(filled))


def test_single_class_and_mismatched_lengths_and_inf_raise_input_error():
    X, y = _data()
    with pytest.raises(InputError):
        SoftShapeClassifier(**TINY).fit(X, np.zeros(len(X)))
    with pytest.raises(InputError):
        SoftShapeClassifier(**TINY).fit(X, y[:-1])
    Xi = X.copy()
    Xi[1, 0, 1] = np.inf
    with pytest.raises(InputError, match="inf"):
        SoftShapeClassifier(**TINY).fit(Xi, y)


def test_labels_not_0_to_c_minus_1_are_reencoded_and_decoded():
    X, y = _data(n_classes=3, n=18)
    labels = np.array(["walk", "run", "sit"])[y]
    clf = SoftShapeClassifier(**TINY).fit(X, labels)
    assert list(clf.classes_) == ["run", "sit", "walk"]
    assert set(clf.predict(X)) <= set(labels)
    y2 = y * 10 + 5
    clf2 = SoftShapeClassifier(**TINY).fit(X, y2)
    assert set(clf2.predict(X)) <= {5, 15, 25}


def test_not_fitted_wrong_length_and_bad_params():
    X, y = _data()
    with pytest.raises(NotFittedError):
        SoftShapeClassifier(**TINY).predict(X)
    clf = SoftShapeClassifier(**TINY).fit(X, y)
    with pytest.raises(InputError):
        clf.predict(X[:, :, :20])
    with pytest.raises(ConfigError, match="The 'd_model' parameter of SoftShapeClassifier must be"):
        SoftShapeClassifier(**{**TINY, "d_model": 6}).fit(X, y)
    with pytest.raises(ConfigError, match="The 'sparsify' parameter"):
        SoftShapeClassifier(**{**TINY, "sparsify": "drop"}).fit(X, y)


def test_routing_collapse_is_recorded_not_warned():
    X, y = _data(n_classes=3, n=18)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = SoftShapeClassifier(**TINY).fit(X, y)
    load = clf.expert_load_
    assert load is not None and load.sum() > 0
    assert clf.routing_collapsed_ == bool(load.max() / load.sum() > 0.9)
    assert not [w for w in caught if "routing" in str(w.message).lower()]


# -- protocols -------------------------------------------------------------------------------------------------
def test_p2_is_60_20_20_and_refuses_tiny_classes():
    y = np.repeat([0, 1], 50)
    splits = list(p2_splits(y, 5, random_state=0))
    assert len(splits) == 5
    for s in splits:
        assert (len(s.train), len(s.val), len(s.test)) == (60, 20, 20)
        assert not set(s.train) & set(s.val) and not set(s.train) & set(s.test) and not set(s.val) & set(s.test)
    tests = np.concatenate([s.test for s in splits])
    assert sorted(tests.tolist()) == list(range(100))
    with pytest.raises(InputError, match="at least n_folds=5"):
        list(p2_splits(np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1]), 5))


# -- aeon's own estimator checks --------------------------------------------------------------------------------
# 'check_estimator_class_tags' forbids a class attribute named 'tags', which trustlab's Method contract
# requires (trustlab tags: role, requires, stochastic); see docs/papers/softshape.md.
AEON_EXCLUDED = ["check_estimator_class_tags"]


@pytest.mark.parametrize("cls", [SoftShapeClassifier, InceptionTimeLite])
def test_aeon_estimator_checks(cls):
    from aeon.testing.estimator_checking import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(cls, raise_exceptions=False, checks_to_exclude=AEON_EXCLUDED)
    failed = {k: v for k, v in results.items() if not str(v).startswith("PASSED")}
    assert len(results) >= 20
    assert not failed, failed


def test_overlay_plot_draws_one_panel_per_series():
    from matplotlib.figure import Figure

    from trustlab.methods.softshape import plot_shape_scores

    X, y = _data(n=4)
    scores = np.random.default_rng(0).random((4, 24))
    fig = plot_shape_scores(X, scores, labels=y)
    assert isinstance(fig, Figure) and sum(ax.get_visible() for ax in fig.axes) >= 4


def test_inception_conv_on_a_sequence_shorter_than_its_kernel_runs_only_the_taps_that_meet_a_token():
    from trustlab.methods.softshape._model import InceptionModule

    g = torch.Generator().manual_seed(0)
    mod = InceptionModule(8, 4, ks=40, norm="instance")
    for L in (1, 4, 16, 19, 20, 30):  # 2L - 1 < 39 up to L = 19; the full kernel from L = 20 on
        b = torch.randn(2, 4, L, generator=g)
        for conv in mod.convs:
            assert torch.allclose(mod._conv(conv, b), conv(b), atol=1e-5)


@pytest.mark.parametrize("spread", [False, True])
def test_moe_dispatch_equals_the_per_expert_loop(spread):
    from trustlab.methods.softshape._model import TopOneMoE

    g = torch.Generator().manual_seed(0)
    moe = TopOneMoE(16, 3, dropout=0.0).eval()
    if spread:  # a router that sends tokens to every expert; zero-initialised, every token goes to expert 0
        with torch.no_grad():
            moe.w_gate.copy_(torch.randn(16, 3, generator=g))
    h = torch.randn(4, 7, 16, generator=g)
    _, _, load = moe(h)
    flat = h.reshape(-1, 16)
    p, i = torch.softmax(flat @ moe.w_gate, dim=1).topk(1, dim=1)
    gate, idx = p / (p + 1e-6), i.squeeze(1)
    ref = torch.zeros_like(flat)
    for e in range(3):
        sel = (idx == e).nonzero(as_tuple=True)[0]
        ref[sel] = moe.experts[e](flat[sel]) * gate[sel]
    assert torch.allclose(moe._dispatch(flat, idx, gate, load), ref, atol=1e-6)
    assert torch.equal(load, torch.bincount(idx, minlength=3)) and (int(load.max()) < 28) == spread
