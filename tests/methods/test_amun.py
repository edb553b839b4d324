"""AMUN: Algorithm 1 invariants, exact restore, bad inputs, and the RMIA / MIA evaluators."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.core.base import state_dict_hash  # noqa: E402
from trustlab.core.exceptions import ConfigError, InputError  # noqa: E402
from trustlab.core.seeding import isolated_global_rng  # noqa: E402
from trustlab.methods import amun as A  # noqa: E402
from trustlab.methods.amun._adversarial import clear_adversarial_cache  # noqa: E402
from trustlab.methods.amun._evaluate import ReferenceModels, taylor_soft_margin  # noqa: E402
from trustlab.models import predict_logits  # noqa: E402


# -- fixtures ------------------------------------------------------------------------------------------
def _net(seed: int = 0, d: int = 16, k: int = 3, dropout: float = 0.0):
    with isolated_global_rng(seed):
        layers = [torch.nn.Linear(d, 32), torch.nn.ReLU()]
        if dropout:
            layers.append(torch.nn.Dropout(dropout))
        return torch.nn.Sequential(*layers, torch.nn.Linear(32, k))


@pytest.fixture(scope="module")
def toy():
    """A small 3-class problem in [0,1]^16 and a model trained on the first 60 points (memorises them)."""
    rng = np.random.default_rng(0)
    centers = rng.random((3, 16))
    y = rng.integers(0, 3, 120)
    X = np.clip(centers[y] + rng.normal(0, 0.25, (120, 16)), 0, 1).astype(np.float32)
    data = A.UnlearningData(X=X, y=y, train_idx=np.arange(60), test_idx=np.arange(60, 120), num_classes=3)
    model = _net()
    A.sgd_train(model, X[:60], y[:60], A.SGDSpec(epochs=40, lr=0.05), random_state=0)
    return model, data


# -- Algorithm 1 ----------------------------------------------------------------------------------------
def test_algorithm1_invariants(toy):
    model, data = toy
    X, y = data.X[:60], data.y[:60]
    D = A.adversarial_set(model, X, y, eps_init=0.05, steps=20, max_doublings=12, use_cache=False)
    with torch.no_grad():
        pred = model(torch.as_tensor(D.x_adv)).argmax(1).numpy()
    ok = ~D.capped
    assert np.all(pred[ok] != y[ok]), "every non-capped x_adv must be misclassified"
    assert np.array_equal(D.success, ok)
    assert np.array_equal(D.y_adv[ok], pred[ok])
    assert np.all(D.norms <= D.eps + 1e-5), "||x_adv - x|| <= final eps"
    assert np.allclose(D.eps, 0.05 * 2.0 ** D.n_doublings), "eps = eps_init * 2^k"
    assert D.x_adv.min() >= 0.0 and D.x_adv.max() <= 1.0, "x_adv inside the input box"
    assert D.x_adv.shape == X.shape and D.x_adv.dtype == np.float32
    assert D.n_doublings.max() >= 1, "the toy needs at least one doubling (tests the continuation)"


def test_premisclassified_points_map_to_themselves(toy):
    model, data = toy
    X, y = data.X[:20], data.y[:20].copy()
    with torch.no_grad():
        pred = model(torch.as_tensor(X)).argmax(1).numpy()
    y[:5] = (pred[:5] + 1) % 3  # the model now "misclassifies" these five
    D = A.adversarial_set(model, X, y, eps_init=0.05, steps=10, use_cache=False)
    assert D.pre_misclassified[:5].all() and not D.pre_misclassified[5:].any()
    assert np.array_equal(D.x_adv[:5], X[:5]) and np.all(D.norms[:5] == 0)
    assert np.array_equal(D.y_adv[:5], pred[:5]) and np.all(D.n_doublings[:5] == 0)


def test_capped_points_are_reported(toy):
    model, data = toy
    X, y = data.X[:30], data.y[:30]
    D = A.adversarial_set(model, X, y, eps_init=1e-4, steps=1, max_doublings=0, use_cache=False)
    assert D.capped.any()
    assert np.array_equal(D.y_adv[D.capped], y[D.capped])
    assert np.all(D.eps == 1e-4) and np.array_equal(D.failed_idx, np.flatnonzero(D.capped))


def test_deterministic_cached_and_mode_restored():
    rng = np.random.default_rng(1)
    X = rng.random((25, 16)).astype(np.float32)
    y = rng.integers(0, 3, 25)
    model = _net(dropout=0.5)
    model.train()
    a = A.adversarial_set(model, X, y, 0.1, steps=10, use_cache=False)
    assert model.training, "train mode must be restored"
    b = A.adversarial_set(model, X, y, 0.1, steps=10, use_cache=False)
    assert np.array_equal(a.x_adv, b.x_adv) and np.array_equal(a.y_adv, b.y_adv)
    clear_adversarial_cache()
    c = A.adversarial_set(model, X, y, 0.1, steps=10)
    d = A.adversarial_set(model, X, y, 0.1, steps=10)
    assert not c.from_cache and d.from_cache and c.key == d.key
    assert np.array_equal(c.x_adv, d.x_adv)
    d.x_adv[:] = 0  # mutating a returned copy must not poison the cache
    assert np.array_equal(A.adversarial_set(model, X, y, 0.1, steps=10).x_adv, c.x_adv)
    e = A.adversarial_set(model, X, y, 0.2, steps=10)
    assert e.key != c.key and not e.from_cache
    with torch.no_grad():
        model[0].weight.add_(0.01)
    assert A.adversarial_set(model, X, y, 0.1, steps=10).key != c.key, "the key must depend on the weights"


def test_algorithm1_bad_inputs(toy):
    model, data = toy
    X, y = data.X[:5], data.y[:5]
    with pytest.raises(InputError, match="input_range"):
        A.adversarial_set(model, X + 2.0, y, 0.1)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        A.adversarial_set(model, bad, y, 0.1)
    with pytest.raises(ConfigError, match="'eps_init' argument of adversarial_set must be a finite float > 0"):
        A.adversarial_set(model, X, y, 0.0)
    with pytest.raises(InputError, match="labels"):
        A.adversarial_set(model, X, y[:3], 0.1)


def _reference_algorithm1(model, X, y, eps_init, steps, max_doublings):
    """Algorithm 1 written plainly (gather the still-correct rows, step them, scatter them back, every step): the
    oracle of the compact-active-set loop in ``_attack_batch``, which must make the same decisions bit for bit."""
    import torch.nn.functional as F

    x0, yt = torch.as_tensor(X), torch.as_tensor(y)
    x, n = x0.clone(), len(x0)
    eps, k = torch.full((n,), float(eps_init)), torch.zeros(n, dtype=torch.int64)
    with torch.no_grad():
        y_adv = model(x0).argmax(1)
    done = y_adv != yt
    for r in range(max_doublings + 1):
        if r > 0:
            eps[~done] *= 2.0
            k[~done] += 1
        for t in range(steps + 1):
            idx = torch.nonzero(~done).flatten()
            if idx.numel() == 0:
                break
            xa = x[idx].requires_grad_(True)
            logits = model(xa)
            p = logits.argmax(1)
            flip = p != yt[idx]
            done[idx[flip]], y_adv[idx[flip]] = True, p[flip]
            if t == steps or bool(flip.all()):
                continue
            (g,) = torch.autograd.grad(F.cross_entropy(logits, yt[idx], reduction="sum"), xa)
            idx, g, xi = idx[~flip], g[~flip], xa.detach()[~flip]
            xi = xi + ((eps[idx] / 10.0) / g.flatten(1).norm(dim=1).clamp_min(1e-12)).view(-1, 1) * g
            delta = xi - x0[idx]
            delta = delta * torch.clamp(eps[idx] / delta.flatten(1).norm(dim=1).clamp_min(1e-12), max=1.0).view(-1, 1)
            x[idx] = (x0[idx] + delta).clamp(0.0, 1.0)
    y_adv[~done] = yt[~done]
    return x.numpy(), y_adv.numpy(), k.numpy(), (~done).numpy()


@pytest.mark.parametrize(("eps_init", "steps", "max_doublings", "batch_size"),
                         [(0.02, 8, 12, 512), (0.02, 8, 12, 7), (1e-3, 2, 1, 512)])
def test_algorithm1_matches_the_plain_loop_bit_for_bit(toy, eps_init, steps, max_doublings, batch_size):
    model, data = toy
    X, y = data.X[:60], data.y[:60].copy()
    with torch.no_grad():
        pred = model(torch.as_tensor(X)).argmax(1).numpy()
    y[:4] = (pred[:4] + 1) % 3  # four pre-misclassified rows
    D = A.adversarial_set(model, X, y, eps_init, steps, max_doublings, batch_size=batch_size, use_cache=False)
    ref = [_reference_algorithm1(model, X[s:s + batch_size], y[s:s + batch_size], eps_init, steps, max_doublings)
           for s in range(0, len(X), batch_size)]
    x_ref, y_ref, k_ref, capped_ref = (np.concatenate([r[i] for r in ref]) for i in range(4))
    # decisions bit for bit; the points to float32 rounding: MKL's sgemm rounds a row by its place in the row
    # blocks of the call (measured on an AMD EPYC with AVX-512: 1 ulp, 2.4e-7, on rows 4-6 of 7-row batches,
    # where the compact loop and the oracle lay the same rows out differently), so bit equality of the points
    # holds on some CPUs only
    assert np.array_equal(D.y_adv, y_ref)
    np.testing.assert_allclose(D.x_adv, x_ref, rtol=0, atol=1e-6)
    assert np.array_equal(D.n_doublings, k_ref) and np.array_equal(D.capped, capped_ref)
    assert D.pre_misclassified[:4].all()


def test_choose_eps_init_pilot_rule(toy):
    model, data = toy
    X, y = data.X[:60], data.y[:60]
    eps0 = A.choose_eps_init(model, X, y, steps=20, pilot=60)
    D = A.adversarial_set(model, X, y, eps0, steps=20, max_doublings=0, use_cache=False)
    assert D.success.mean() >= 0.9


# -- the ModelEdits -------------------------------------------------------------------------------------
EDITS = [A.AMUN(epochs=3, eps_init=0.1, steps=10, random_state=0),
         A.AMUN(variant="advonly", use_remain=False, epochs=3, steps=10, random_state=0),
         A.Retrain(epochs=3, random_state=0), A.FineTune(epochs=3, random_state=0),
         A.GradientAscent(lr=0.01, epochs=2, random_state=0), A.RandomLabel(epochs=3, random_state=0),
         A.BoundaryShrink(epochs=3, random_state=0), A.SalUn(epochs=3, random_state=0),
         A.L1Sparse(epochs=3, random_state=0)]


@pytest.mark.parametrize("edit", EDITS, ids=lambda e: f"{type(e).__name__}")
def test_edit_changes_weights_and_restores_exactly(toy, edit):
    model, data = toy
    before = state_dict_hash(model)
    handle = edit.apply(model, np.arange(10), data)
    assert state_dict_hash(model) != before, "the edit must change the weights"
    assert handle.info.n_forget == 10 and handle.info.n_retain == 50
    handle.restore()
    assert state_dict_hash(model) == before


def test_amun_info_and_sets(toy):
    model, data = toy
    with A.AMUN(epochs=2, eps_init=0.1, steps=10, random_state=0).apply(model, np.arange(10), data) as h:
        assert h.info.n_finetune == 50 + 10 + h.info.adv["n_used"]
        assert 0 < h.info.adv["success_rate"] <= 1
    with A.AMUN(variant="advonly", epochs=2, eps_init=0.1, steps=10, random_state=0).apply(
            model, np.arange(10), data) as h:
        assert h.info.n_finetune == 50 + h.info.adv["n_used"]
        assert h.info.adv["from_cache"], "D_A is computed once on the original model"


def test_amun_raises_forget_loss_and_keeps_retain(toy):
    model, data = toy
    f = np.arange(20)

    def forget_loss() -> float:
        lg = predict_logits(model, data.X[f])
        return float(np.mean(-A.threshold_scores(lg, data.y[f], "loss")))

    before = forget_loss()
    with A.AMUN(variant="advonly", lr=0.1, epochs=10, eps_init=0.1, random_state=0).apply(model, f, data):
        after = forget_loss()
        with pytest.warns(A.SmallSampleWarning, match="20 forget"):
            m = A.evaluate_unlearning(model, data, f)
    assert after > before and m.RA >= 90
    assert forget_loss() == pytest.approx(before)


@pytest.mark.parametrize("bad, match", [
    (np.array([], dtype=int), "non-empty"),
    (np.array([0, 500]), "out of range"),
    (np.array([1, 1, 2]), "duplicated"),
    (np.arange(60), "whole training set"),
    (np.array([3, 70]), "overlaps the test set"),
    (np.array([0.5, 1.0]), "integer"),
])
def test_bad_forget_indices(toy, bad, match):
    model, data = toy
    before = state_dict_hash(model)
    with pytest.raises(InputError, match=match):
        A.AMUN(epochs=1, eps_init=0.1, random_state=0).apply(model, bad, data)
    assert state_dict_hash(model) == before


def test_forget_outside_train_set_and_bad_data(toy):
    model, data = toy
    partial = A.UnlearningData(X=data.X, y=data.y, train_idx=np.arange(40), test_idx=np.arange(60, 120))
    with pytest.raises(InputError, match="not in the training set"):
        A.FineTune(epochs=1).apply(model, np.array([45]), partial)
    out = A.UnlearningData(X=data.X * 3.0, y=data.y, train_idx=data.train_idx, test_idx=data.test_idx)
    with pytest.raises(InputError, match="outside the declared input_range"):
        A.AMUN(epochs=1).apply(model, np.arange(5), out)
    floaty = A.UnlearningData(X=data.X, y=data.y + 0.5, train_idx=data.train_idx, test_idx=data.test_idx)
    with pytest.raises(InputError, match="integer"):
        A.FineTune(epochs=1).apply(model, np.arange(5), floaty)
    with pytest.raises(InputError, match="overlap"):
        A.FineTune(epochs=1).apply(model, np.arange(5), A.UnlearningData(X=data.X, y=data.y, train_idx=np.arange(60),
                                                                        test_idx=np.arange(50, 70)))
    with pytest.raises(ConfigError, match="use_remain"):
        A.FineTune(epochs=1, use_remain=False).apply(model, np.arange(5), data)


def test_gradient_ascent_nan_raises_clear_error_and_restores(toy):
    model, data = toy
    before = state_dict_hash(model)
    with pytest.raises(A.UnlearningDivergedError, match="diverged"):
        A.GradientAscent(lr=1e8, epochs=20, use_remain=False, random_state=0).apply(model, np.arange(30), data)
    assert state_dict_hash(model) == before


def test_tuple_data_is_accepted(toy):
    model, data = toy
    X, y = data.X[:60], data.y[:60]
    before = state_dict_hash(model)
    with A.FineTune(epochs=1, random_state=0).apply(model, np.arange(5), (X, y)) as h:
        assert h.info.n_retain == 55
    assert state_dict_hash(model) == before


# -- evaluators -----------------------------------------------------------------------------------------
def test_taylor_soft_margin_values_and_guard():
    logits = np.zeros((1, 10))
    p, n_bad = taylor_soft_margin(logits, [0])
    tay = lambda v: 1 + v + v**2 / 2 + v**3 / 6  # noqa: E731
    assert p[0] == pytest.approx(tay(-0.6) / (9 + tay(-0.6))) and n_bad == 0
    very_negative = np.array([[-40.0, 0.0, 0.0]])  # the cubic series goes negative: floored, counted
    p, n_bad = taylor_soft_margin(very_negative, [0])
    assert p[0] == 1e-12 and n_bad == 1
    p3, _ = taylor_soft_margin(np.zeros((4, 2, 3)), [0, 1])
    assert p3.shape == (4, 2)


def _synthetic_refs(n=200, k=10, m=8, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(0, 1, (m, n, k))
    in_mask = np.zeros((m, n), bool)
    for j in range(0, m, 2):
        half = rng.permutation(n)[: n // 2]
        in_mask[j, half] = True
        in_mask[j + 1] = ~in_mask[j]
    logits[np.arange(m)[:, None], np.arange(n)[None], labels[None]] += 2.0 + 3.0 * in_mask
    return ReferenceModels(logits, in_mask), labels, rng


def test_rmia_separates_members_and_refuses_too_few_refs():
    refs, labels, rng = _synthetic_refs()
    n, k = len(labels), 10
    members = np.arange(100)
    target = rng.normal(0, 1, (n, k))
    target[np.arange(n), labels] += 2.0
    target[members, labels[members]] += 3.0
    s = A.rmia_scores(target, refs, labels, np.arange(n))
    assert np.all((s >= 0) & (s <= 1))
    assert A.mia_auc(s[:100], s[100:]) > 80
    # a target that memorised nothing: chance
    null = rng.normal(0, 1, (n, k))
    null[np.arange(n), labels] += 3.5
    s0 = A.rmia_scores(null, refs, labels, np.arange(n))
    assert abs(A.mia_auc(s0[:100], s0[100:], balanced=False) - 50) < 12
    with pytest.raises(InputError, match="at least 2 reference models"):
        ReferenceModels(refs.logits[:1], refs.in_mask[:1])
    with pytest.raises(ConfigError, match="'n_models' argument of fit_reference_models"):
        A.fit_reference_models(lambda: _net(), np.zeros((4, 16), np.float32), np.zeros(4, int), 1)
    with pytest.warns(UserWarning, match="IN for"):
        ReferenceModels(refs.logits, np.ones_like(refs.in_mask))


def test_rmia_excludes_x_from_its_own_population():
    refs, labels, rng = _synthetic_refs(n=50)
    target = rng.normal(0, 1, (50, 10))
    s_all = A.rmia_scores(target, refs, labels, np.arange(50))
    # x's own comparison never counts; the denominator is |Z| - 1
    assert np.allclose(s_all * 49, np.round(s_all * 49))


def test_threshold_svc_and_avg_gap():
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.5]])
    assert np.allclose(A.threshold_scores(logits, [0, 2], "margin"), [2.0, -0.5])
    assert np.all(A.threshold_scores(logits, [0, 2], "loss") < 0)
    with pytest.raises(ConfigError, match="'kind' argument of threshold_scores"):
        A.threshold_scores(logits, [0, 2], "bogus")
    rng = np.random.default_rng(0)
    lg = rng.normal(0, 1, (90, 3))
    lab = rng.integers(0, 3, 90)
    lg[np.arange(60), lab[:60]] += 5  # retain + forget confident, test not
    out = A.svc_mia(lg, lab, np.arange(30), np.arange(30, 60), np.arange(60, 90))
    assert set(out) == {"confidence", "entropy", "m_entropy", "prob"} and out["confidence"] < 30
    assert A.avg_gap({"UA": 90, "RA": 100, "TA": 80, "AUC": 55}, {"UA": 80, "RA": 100, "TA": 80, "AUC": 50}) == 3.75
    with pytest.raises(InputError):
        A.avg_gap({"UA": 1}, {"UA": 1})


def test_end_to_end_digits_membership_is_visible():
    """Original model: forget-vs-test RMIA AUC clearly above the retrained model's (small, ~5 s)."""
    from trustlab.data import load_digits_images
    from trustlab.models import MLP

    ds = load_digits_images(noise=0.35, random_state=0)
    X, y = ds.X, ds.y
    rng = np.random.default_rng(0)
    pool = rng.permutation(len(X))[:700]
    Xp, yp = X[pool], y[pool]
    data = A.UnlearningData(X=Xp, y=yp, train_idx=np.arange(300), test_idx=np.arange(300, 700), num_classes=10)
    spec = A.SGDSpec(epochs=40, lr=0.05)
    refs = A.fit_reference_models(lambda: MLP(64, 10, hidden=(128,)), Xp, yp, 4, spec=spec, random_state=0)
    with isolated_global_rng(0):
        model = MLP(64, 10, hidden=(128,))
    A.sgd_train(model, Xp[:300], yp[:300], spec, random_state=0)
    f = np.arange(60)
    orig = A.evaluate_unlearning(model, data, f, refs, balanced=False, svc=True)
    with A.Retrain(epochs=40, weight_decay=0.0, random_state=0).apply(model, f, data):
        retr = A.evaluate_unlearning(model, data, f, refs, balanced=False)
    assert orig.UA == 100.0 and retr.UA < 100.0
    assert orig.AUC > retr.AUC + 8
    assert "confidence" in orig.svc and "SVC_confidence" in orig.to_dict()


# -- issue 15: bad inputs that used to give a wrong result or a deep traceback ------------------------------
def test_rmia_scores_gamma_zero_refused_and_gamma_below_one_in_range():
    refs, labels, rng = _synthetic_refs(n=60)
    target = rng.normal(0, 1, (60, 10))
    with pytest.raises(ConfigError, match="'gamma' argument of rmia_scores must be a finite float > 0"):
        A.rmia_scores(target, refs, labels, np.arange(60), gamma=0)
    s = A.rmia_scores(target, refs, labels, np.arange(60), gamma=0.5)  # x no longer counts itself
    assert s.min() >= 0 and s.max() <= 1


def test_rmia_scores_nan_logits_refused():
    refs, labels, rng = _synthetic_refs(n=40)
    target = rng.normal(0, 1, (40, 10))
    target[3, 2] = np.nan
    with pytest.raises(InputError, match="'target_logits' argument of rmia_scores.*NaN"):
        A.rmia_scores(target, refs, labels, np.arange(40))
    bad = refs.logits.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN or infinite"):
        ReferenceModels(bad, refs.in_mask)


@pytest.mark.parametrize("cand", [[-1], [40], [0.5]])
def test_rmia_scores_candidates_outside_the_pool_refused(cand):
    refs, labels, rng = _synthetic_refs(n=40)
    with pytest.raises(InputError, match="candidates"):
        A.rmia_scores(rng.normal(0, 1, (40, 10)), refs, labels, cand)


@pytest.mark.parametrize("labels", [[0, -1], [0.0, 1.5], [0, 3]])
def test_threshold_scores_bad_labels_refused(labels):
    """label -1 wrapped to the last class, float labels were truncated, out-of-range labels wrapped."""
    with pytest.raises(InputError, match="labels"):
        A.threshold_scores(np.zeros((2, 3)), labels)


def test_mia_auc_n_rep_zero_refused_and_small_samples_warn():
    with pytest.raises(ConfigError, match="'n_rep' argument of mia_auc"):
        A.mia_auc([1.0, 2.0], [0.0, 1.0], n_rep=0)
    with pytest.warns(A.SmallSampleWarning, match="2 members"):
        A.mia_auc([1.0, 2.0], [0.0, 1.0])


def test_svc_mia_empty_set_refused():
    lg = np.random.default_rng(0).normal(size=(10, 3))
    with pytest.raises(InputError, match="'forget_idx' argument of svc_mia"):
        A.svc_mia(lg, np.zeros(10, int), np.arange(4), np.array([], int), np.arange(5, 10))


def test_fit_reference_models_nan_input_refused():
    X = np.zeros((4, 16), np.float32)
    X[0, 0] = np.nan
    with pytest.raises(InputError, match="'X' argument of fit_reference_models.*NaN"):
        A.fit_reference_models(lambda: _net(), X, np.zeros(4, int), 2)


@pytest.mark.parametrize("label", [9, -1])
def test_adversarial_set_labels_outside_the_model_refused(toy, label):
    """A label the 3-class model cannot output used to return x_adv == x as if already misclassified."""
    model, data = toy
    y = data.y[:5].copy()
    y[0] = label
    with pytest.raises(InputError, match="'y' argument of adversarial_set"):
        A.adversarial_set(model, data.X[:5], y, 0.1)


def test_unlearning_refuses_a_model_with_the_wrong_number_of_outputs(toy):
    _, data = toy
    with pytest.raises(InputError, match="4 outputs, but the data has 3 classes"):
        A.FineTune(epochs=1).apply(_net(k=4), np.arange(5), data)


def test_sgd_train_returns_a_history_and_retrain_can_stop_at_an_accuracy(toy):
    from trustlab.models import TrainHistory

    model, data = toy
    net = _net(seed=3)
    hist = A.sgd_train(net, data.X[:60], data.y[:60], A.SGDSpec(epochs=5), random_state=0)
    assert isinstance(hist, TrainHistory) and hist.epochs_run == 5 and hist.wall_time_s > 0
    with A.Retrain(epochs=200, target_accuracy=1.0, random_state=0).apply(model, np.arange(10), data) as h:
        assert 1 <= h.info.epochs_run < 200
        assert predict_logits(model, data.X[10:60]).argmax(1).tolist() == data.y[10:60].tolist()


# -- packaging ------------------------------------------------------------------------------------------
def test_light_import_and_registration():
    code = ("import sys, trustlab.methods.amun as m; from trustlab.core.registry import METHODS; "
            "assert 'torch' not in sys.modules, 'torch imported at module top'; "
            "assert {'AMUN','Retrain','FineTune','GradientAscent','RandomLabel','BoundaryShrink','SalUn','L1Sparse'} "
            "<= set(METHODS.names())")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_experiment_configs_validate():
    from trustlab.experiments.amun import Config

    for mode in ("quick", "default", "paper"):
        Config.for_mode(mode).validate()
    with pytest.raises(ConfigError):
        Config(n_refs=3).validate()
    with pytest.raises(ConfigError):
        Config(methods=("FT",)).validate()


def test_seed_keyword_is_the_deprecated_random_state():
    """Issue 43: the int-only seed= became random_state= (int, Generator or None); seed= still works, with a warning."""
    a, b = np.linspace(0, 1, 60), np.linspace(0.2, 1.2, 80)
    with pytest.warns(FutureWarning, match="random_state"):
        old = A.mia_auc(a, b, seed=3)
    assert old == A.mia_auc(a, b, random_state=3)
    assert np.isfinite(A.mia_auc(a, b, random_state=np.random.default_rng(0)))
    assert A.SGDSpec().train_config(random_state=5).seed == 5
