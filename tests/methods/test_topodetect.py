"""Tests of trustlab.methods.topodetect (issue 19): persistence, TP/MK losses, the differentiable H0 path,
per-sample features, MMD detectors, MiniCLIP and the zero-shot attacks."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import ConfigError, InputError, TrustlabError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("ripser") is None,
                                reason="needs torch and ripser")

torch = pytest.importorskip("torch")
td = pytest.importorskip("trustlab.methods.topodetect")


def _cloud(n=30, d=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


# -- persistence and losses --------------------------------------------------------------------------------------
def test_h0_total_persistence_is_the_mst_length_and_matches_ripser():
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    X = _cloud(40, 5)
    mst = float(minimum_spanning_tree(squareform(pdist(X))).sum())
    D0 = np.column_stack([np.zeros(39), td.h0_deaths(X)])
    assert abs(td.total_persistence(D0) - mst) < 1e-9
    assert abs(float(td.tp_h0_torch(torch.as_tensor(X))) - mst) < 1e-9
    # ripser computes in float32: the same bars to float32 precision
    rip = td.persistence_diagrams(X, maxdim=0)[0]
    assert np.allclose(np.sort(rip[:, 1]), td.h0_deaths(X), rtol=1e-6, atol=1e-6) and (rip[:, 0] == 0).all()


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("dim", [0, 1])
def test_total_persistence_scales_as_c_to_the_alpha(alpha, dim):
    X = _cloud(30, 3, seed=1)
    c = 2.5
    a = td.total_persistence(td.persistence_diagrams(X)[dim], alpha)
    b = td.total_persistence(td.persistence_diagrams(c * X)[dim], alpha)
    assert a > 0 and abs(b - c ** alpha * a) < 1e-5 * max(1.0, b)


def test_tp_loss_is_zero_for_equal_clouds_and_positive_for_a_scaled_one():
    X = _cloud()
    assert td.tp_loss(X, X.copy(), dims=(0, 1)) == 0.0
    assert td.tp_loss(X, 1.5 * X, dims=(0,)) == pytest.approx(0.5 * td.h0_deaths(X).sum(), rel=1e-9)


def test_mk_loss_squared_matches_persim_heat():
    persim = pytest.importorskip("persim")
    X, Y = _cloud(25, 3, 2), 1.3 * _cloud(25, 3, 3)
    for dim in (0, 1):
        dx, dy = td.persistence_diagrams(X)[dim], td.persistence_diagrams(Y)[dim]
        if dim == 0:
            dx = np.column_stack([np.zeros(len(td.h0_deaths(X))), td.h0_deaths(X)])
            dy = np.column_stack([np.zeros(len(td.h0_deaths(Y))), td.h0_deaths(Y)])
        ref = persim.heat(dx, dy, sigma=0.05) ** 2
        assert td.mk_loss(X, Y, sigmas=(0.05,), dims=(dim,)) == pytest.approx(ref, rel=1e-8, abs=1e-12)
    assert td.mk_loss(X, X, sigmas=(0.05, 0.5)) == pytest.approx(0.0, abs=1e-10)


def test_logits_view_and_unimodal_control():
    rng = np.random.default_rng(0)
    img, txt = rng.normal(size=(12, 4)), rng.normal(size=(12, 4))
    A, B = td.contrast_clouds(img, txt, view="logits", temperature=2.0)
    assert A.shape == (12, 12) and np.allclose(A, B.T)
    tl = td.topo_losses(img, txt, h1=True)
    unit = img / np.linalg.norm(img, axis=1, keepdims=True)
    assert tl.image_tp_h0 == pytest.approx(td.h0_deaths(unit).sum())
    assert tl.tp_h0 == pytest.approx(abs(td.h0_deaths(unit).sum()
                                         - td.h0_deaths(txt / np.linalg.norm(txt, axis=1, keepdims=True)).sum()))


def test_signature_sweep_is_monotone_when_adversarial_embeddings_spread():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(5, 8))
    lab = rng.integers(0, 5, 120)
    clean = centers[lab] + 0.05 * rng.normal(size=(120, 8))
    adv = clean + 0.6 * rng.normal(size=(120, 8))
    txt = centers[lab]
    sw = td.signature_sweep(clean, txt, adv, txt, (0.0, 0.25, 0.5, 0.75, 1.0), n_batches=3, batch_size=20, h1=False,
                            random_state=0)
    assert abs(sw.spearman["tp_h0"]) == pytest.approx(1.0) and sw.spearman["image_tp_h0"] == pytest.approx(1.0)
    assert len(sw.means["mk_h0"]) == 5 and sw.values["tp_h0"].shape == (5, 3)


# -- differentiable H0 and features ------------------------------------------------------------------------------
def test_h0_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(15, 3, generator=g, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(td.tp_h0_torch(Z, alpha=1.5), Z)
    for _ in range(3):
        V = torch.randn(15, 3, generator=g, dtype=torch.float64)
        h = 1e-6
        with torch.no_grad():
            fd = (td.tp_h0_torch(Z + h * V, alpha=1.5) - td.tp_h0_torch(Z - h * V, alpha=1.5)) / (2 * h)
        assert abs(float((grad * V).sum()) - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))
    assert float(td.tp_h0_torch(Z.detach())) == pytest.approx(td.h0_deaths(Z.detach().numpy()).sum())


def test_duplicate_points_give_zero_length_bars_and_finite_zero_gradients():
    X = np.vstack([_cloud(6, 3), _cloud(6, 3)])  # every point twice
    d = td.h0_deaths(X)
    assert len(d) == 11 and (d == 0).sum() == 6 and np.isfinite(d).all()
    Z = torch.tensor(np.vstack([np.zeros((3, 2)), np.ones((1, 2))]), requires_grad=True)
    (grad,) = torch.autograd.grad(td.tp_h0_torch(Z), Z)
    assert torch.isfinite(grad).all() and float(grad[:3].abs().sum(1).min()) == 0.0


def test_topo_features_shape_sign_and_reproducibility():
    rng = np.random.default_rng(0)
    img, txt, ri, rt = rng.normal(size=(4, 5)), rng.normal(size=(4, 5)), rng.normal(size=(20, 5)), rng.normal(size=(20, 5))
    a = td.topo_features(img, txt, ri, rt, n_batches=3, batch_size=6, random_state=1)
    b = td.topo_features(img, txt, ri, rt, n_batches=3, batch_size=6, random_state=1)
    assert a.shape == (4, 5) and np.array_equal(a, b) and np.isfinite(a).all() and np.abs(a).sum() > 0
    # one batch: the cross-modal gradient is sign(TP_x - TP_y) times the unimodal one, row by row
    a1 = td.topo_features(img, txt, ri, rt, n_batches=1, batch_size=6, view="contrast", random_state=2)
    u1 = td.topo_features(img, txt, ri, rt, n_batches=1, batch_size=6, view="image", random_state=2)
    assert np.allclose(np.abs(a1), np.abs(u1))
    # issue 40: the joint cloud's feature sees the texts, so it is not +-1 times the image-only one
    j1 = td.topo_features(img, txt, ri, rt, n_batches=1, batch_size=6, view="joint", random_state=2)
    assert not np.allclose(np.abs(j1), np.abs(u1))
    # the feature is the gradient: moving x along it raises the mean loss (first-order check on one batch)
    from trustlab.core.seeding import check_random_state

    idx = check_random_state(2).choice(20, 5, replace=False)
    Zx = np.vstack([img[:1], ri[idx]])
    unit = Zx / np.linalg.norm(Zx, axis=1, keepdims=True)
    base = td.h0_deaths(unit).sum()
    h = 1e-6
    Zp = Zx.copy()
    Zp[0] += h * u1[0]
    up = td.h0_deaths(Zp / np.linalg.norm(Zp, axis=1, keepdims=True)).sum()
    assert (up - base) / h == pytest.approx(float(u1[0] @ u1[0]), rel=1e-3)


@pytest.mark.parametrize("view", ["image", "contrast", "joint"])
def test_topo_features_equal_autograd_through_the_torch_h0_path(view):
    from trustlab.core.seeding import check_random_state

    rng = np.random.default_rng(4)
    img, ri = rng.normal(size=(1, 6)), rng.normal(size=(30, 6))
    txt, rt = rng.normal(size=(1, 6)), rng.normal(size=(30, 6))[rng.integers(0, 30, 30) % 5]  # duplicated texts
    g = td.topo_features(img, txt, ri, rt, n_batches=1, batch_size=12, view=view, random_state=3)
    idx = check_random_state(3).choice(30, 11, replace=False)
    Z = torch.tensor(np.vstack([img, ri[idx]]), requires_grad=True)
    Tt = torch.tensor(np.vstack([txt, rt[idx]]))
    loss = td.tp_h0_torch(Z / Z.norm(dim=1, keepdim=True))
    if view == "contrast":
        loss = (loss - td.tp_h0_torch(Tt / Tt.norm(dim=1, keepdim=True))).abs()
    elif view == "joint":  # images then texts in one cloud (the order does not change the tree)
        J = torch.cat([Z, Tt])
        loss = td.tp_h0_torch(J / J.norm(dim=1, keepdim=True))
    (grad,) = torch.autograd.grad(loss, Z)
    assert np.allclose(grad[0].numpy(), g[0], atol=1e-12) and np.abs(g).max() > 0


# -- bad inputs --------------------------------------------------------------------------------------------------
def test_bad_inputs_are_refused_with_the_argument_named():
    X = _cloud(10, 3)
    with pytest.raises(InputError, match="'X'"):
        td.tp_loss(np.array([[np.nan, 0.0], [1.0, 1.0]]), X)
    with pytest.raises(TrustlabError, match="'alpha'"):
        td.tp_loss(X, X, alpha=0.0)
    with pytest.raises(TrustlabError, match="'alpha'"):
        td.total_persistence(np.zeros((2, 2)), alpha=-1.0)
    with pytest.raises(TrustlabError, match="'sigmas'"):
        td.mk_loss(X, X, sigmas=())
    with pytest.raises(TrustlabError, match="'sigmas'"):
        td.mk_loss(X, X, sigmas=(0.0,))
    with pytest.raises(InputError, match="'text_emb'"):
        td.contrast_clouds(X, _cloud(10, 4), view="logits")
    with pytest.raises(InputError, match="'text_emb'"):
        td.contrast_clouds(X, _cloud(9, 3))
    with pytest.raises(InputError, match="'X'"):
        td.persistence_diagrams(_cloud(600, 2), maxdim=1)
    with pytest.raises(InputError, match="'maxdim'"):
        td.persistence_diagrams(_cloud(70, 2), maxdim=2)
    with pytest.raises(InputError, match="'ref_image'"):
        td.topo_features(X[:2], X[:2], X, _cloud(10, 4))
    with pytest.raises(InputError, match="NaN"):
        td.tp_h0_torch(torch.tensor([[float("nan"), 0.0], [1.0, 1.0]]))


def test_too_few_points_for_h1_warn_and_return_zero_never_nan():
    X = _cloud(3, 2)
    with pytest.warns(UserWarning, match="H1"):
        v = td.tp_loss(X, X * 2, dims=(1,))
    assert v == 0.0
    with pytest.warns(UserWarning, match="H0"):
        assert td.tp_loss(X[:1], X[:1], dims=(0,)) == 0.0
    # different dimensionality is allowed for the embedding view (distances stay inside a cloud)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(td.tp_loss(_cloud(8, 2), _cloud(8, 7)))


# -- detectors ---------------------------------------------------------------------------------------------------
def _groups(n=40, d=6, shift=1.0, seed=0):
    rng = np.random.default_rng(seed)
    C, A = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    A[:, :2] += shift
    return C, A


@pytest.mark.parametrize("cls,kw", [("MMDGaussian", {}), ("MMDDeep", {"epochs": 20}),
                                    ("SAMMD", {"n_semantic": 2, "epochs": 20}),
                                    ("TopoSAMMD", {"n_semantic": 2, "n_topo": 2, "epochs": 20})])
def test_detectors_reject_a_shift_and_accept_the_null(cls, kw):
    C, A = _groups(shift=2.0)
    det = getattr(td, cls)(n_null=100, random_state=0, **kw).fit(np.vstack([C[:20], A[:20]]), np.repeat([0, 1], 20))
    r = det.test(C[20:], A[20:])
    assert isinstance(r, td.TestResult) and r.reject and r.p_value <= 0.05 and 0 <= r.power_estimate <= 1
    C2, _ = _groups(seed=5)
    assert not det.test(C[20:], C2[20:]).reject
    s = det.score_samples(np.vstack([C[20:], A[20:]]))
    assert s[20:].mean() > s[:20].mean()


def _sharp_groups(rng, n, shift):
    """2 semantic columns (shifted by ``shift`` in the second group) and 10 wide raw columns, so that SAMMD's
    default raw bandwidth (2 x raw dimension) gives a sharp kernel (off-diagonal mean ~0.03), as trained
    kernels on the digits are."""
    C = np.hstack([rng.normal(size=(n, 2)), 2.0 * rng.normal(size=(n, 10))])
    A = np.hstack([rng.normal(size=(n, 2)) + shift, 2.0 * rng.normal(size=(n, 10))])
    return C, A


def test_wild_bootstrap_sammd_has_power_and_size_with_a_sharp_kernel():
    # Regression: the V-statistic wild bootstrap (diagonal H_ii kept, weighted w_i^2 in every copy) rejected
    # this planted shift in 30% of 40 sets with type-I 0.00 (permutation-free, so no other test caught it).
    rng = np.random.default_rng(0)
    C, A = _sharp_groups(rng, 40, 1.5)
    det = td.SAMMD(n_semantic=2, train=False, n_null=200, random_state=0).fit(np.vstack([C, A]), np.repeat([0, 1], 40))
    power, size = [], []
    for _ in range(40):
        X, Y = _sharp_groups(rng, 30, 1.5)
        X0, _ = _sharp_groups(rng, 30, 0.0)
        power.append(det.test(X, Y).reject)
        size.append(det.test(X, X0).reject)
    assert np.mean(power) >= 0.8
    assert np.mean(size) <= 0.15


def test_wild_bootstrap_statistic_is_the_unbiased_mmd_the_kernel_is_trained_on():
    from trustlab.methods.topodetect._kernels import mmd2_and_var, wild_bootstrap_null

    rng = np.random.default_rng(1)
    Z = rng.normal(size=(24, 3))
    K = np.exp(-((Z[:, None] - Z[None]) ** 2).sum(-1) / 3.0)
    stat, null = wild_bootstrap_null(K, 12, 500, rng)
    m, _ = mmd2_and_var(torch.as_tensor(K), 12)
    assert stat == pytest.approx(float(m), abs=1e-12)
    assert abs(null.mean()) < 3 * null.std() / np.sqrt(len(null))  # the copies are centred at 0 (H0 of MMD^2_u)


def test_trained_sammd_increases_the_power_criterion():
    C, A = _groups(shift=0.5)
    det = td.SAMMD(n_semantic=2, epochs=60, lr=0.05, random_state=0).fit(np.vstack([C, A]), np.repeat([0, 1], 40))
    assert det.history_[-1] > det.history_[0]


def test_test_refuses_bad_inputs():
    C, A = _groups()
    det = td.SAMMD(n_semantic=2, epochs=2, n_null=40, random_state=0).fit(np.vstack([C[:20], A[:20]]),
                                                                        np.repeat([0, 1], 20))
    with pytest.raises(InputError, match="'Y'"):
        det.test(C[20:30], A[20:25])  # wild bootstrap needs n_x = n_y
    with pytest.raises(InputError, match=">= 4 rows"):
        det.test(C[20:23], A[20:23])
    with pytest.raises(InputError, match="leakage"):
        det.test(C[:10], A[30:40])
    with pytest.raises(InputError, match="columns"):
        det.test(C[20:30, :4], A[20:30, :4])
    with pytest.raises(InputError):
        det.test(np.full((6, 6), np.nan), A[20:26])
    with pytest.raises(InputError, match="n_null"):
        td.MMDGaussian(n_null=10, alpha=0.05).fit(C)
    with pytest.raises(TrustlabError, match="alpha"):
        td.MMDGaussian(alpha=1.5).fit(C)
    with pytest.raises(InputError, match="n_semantic"):
        td.SAMMD(n_semantic=6).fit(C)
    with pytest.raises(InputError, match="equal group sizes"):
        td.SAMMD(n_semantic=2).fit(np.vstack([C[:20], A[:10]]), np.repeat([0, 1], [20, 10]))
    with pytest.raises(InputError, match=">= 4 rows"):
        td.MMDGaussian().fit(C[:3])


@pytest.mark.slow
def test_permutation_p_values_are_uniform_under_the_null():
    from scipy.stats import kstest

    rng = np.random.default_rng(0)
    det = td.MMDGaussian(n_null=100, random_state=0).fit(rng.normal(size=(30, 3)))
    p = [det.test(rng.normal(size=(15, 3)), rng.normal(size=(15, 3))).p_value for _ in range(200)]
    assert kstest(p, "uniform").pvalue > 0.01


# -- MiniCLIP and attacks ----------------------------------------------------------------------------------------
def _tiny_clip():
    from trustlab.core.seeding import isolated_global_rng

    rng = np.random.default_rng(0)
    feats = rng.normal(size=(6, 10)).astype(np.float32)
    with isolated_global_rng(0):
        return td.MiniCLIP(feats, np.array([0, 0, 1, 1, 2, 2]), dim=8, image_size=8, channels=4)


def test_miniclip_trains_and_its_zero_shot_logits_feed_the_attacks():
    rng = np.random.default_rng(0)
    X = (rng.random((30, 1, 8, 8)) * 0.3).astype(np.float32)
    y = np.repeat([0, 1, 2], 10)
    X[y == 1, :, :4] += 0.6
    X[y == 2, :, :, :4] += 0.6
    X = np.clip(X, 0, 1)
    m = _tiny_clip()
    hist = td.train_miniclip(m, X, y, epochs=40, batch_size=16, lr=1e-2, random_state=0)
    assert hist.losses[-1] < hist.losses[0]
    with torch.no_grad():
        acc = float((m(torch.as_tensor(X)).argmax(1).numpy() == y).mean())
    assert acc > 0.9
    for atk in (td.ZeroShotFGSM(model=m, random_state=0), td.ZeroShotPGD(model=m, steps=5, random_state=0)):
        res = atk.generate((X.astype(np.float64), y), 0.2)
        assert res.cost.max() <= 0.2 + 1e-9 and res.outputs.shape == X.shape
        assert res.outputs.min() >= 0 and res.outputs.max() <= 1
    with pytest.raises(InputError, match="labels"):
        td.ZeroShotPGD(model=m).generate((X, np.full(30, 7)), 0.1)


def test_fgsm_matches_torchattacks_directly():
    ta = pytest.importorskip("torchattacks")
    m = _tiny_clip()
    X = np.random.default_rng(0).random((5, 1, 8, 8)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1])
    ours = td.ZeroShotFGSM(model=m, random_state=0).generate((X, y), 0.05).outputs
    ref = ta.FGSM(m.eval(), eps=0.05)(torch.as_tensor(X), torch.as_tensor(y)).numpy()
    assert np.allclose(ours, ref, atol=1e-6)


def test_caption_features_with_a_user_embedder():
    class Emb:
        def encode(self, caps):
            return np.array([[len(c), c.count(" ")] for c in caps], dtype=float)

    F, lab = td.caption_features(("zero", "one"), ("a {name}", "digit {digit}"), embedder=Emb())
    assert F.shape == (4, 2) and lab.tolist() == [0, 0, 1, 1] and F[0, 0] == len("a zero")


def test_miniclip_refuses_bad_text_features():
    with pytest.raises(InputError, match="text_features"):
        td.MiniCLIP(np.full((2, 3), np.nan), np.array([0, 1]))
    with pytest.raises(InputError, match="image_tower"):
        td.MiniCLIP(np.zeros((2, 3)), np.array([0, 1]), image_tower="vit")


# -- experiment --------------------------------------------------------------------------------------------------
def test_experiment_config_and_claims_are_declared():
    from trustlab.experiments import topodetect as exp

    ids = {c.id for c in exp.CLAIMS}
    assert set(exp.QUICK_EXPECTED_PASS) <= ids and {"C1", "C1b", "C2", "C3", "C4", "C4f", "C5"} <= ids
    q = exp.Config.quick()
    q.validate()
    notes = {c.id: c.note_for(q.to_dict()) for c in exp.CLAIMS}
    assert f"{q.reps} test sets" in notes["C4"] and f"{q.sig_batches} batches" in notes["C1"]
    for bad in ({"ns": (2,)}, {"attacks": ("fgsm",)}, {"eps": -0.1}, {"eps": 1.5}, {"sigmas": ()}):
        with pytest.raises(ConfigError):
            exp.Config(**bad).validate()
    exp.Config(eps=0.0).validate()  # the KNOCKOUT's value


def test_premises_void_c4_when_the_features_coincide_or_the_baseline_saturates():
    """Issue 39: the cross-modal feature equal to the unimodal one (corr 1), or SAMMD at power 1.00, voids C4."""
    from trustlab.experiments import topodetect as exp
    from trustlab.experiments.base import evaluate_claims
    from trustlab.results.result import Result

    assert exp.KNOCKOUT == ("eps=0",)
    r = Result("topodetect", "quick", {"h1": False})
    r.summary.update(accuracy={"cnn/seed0/clean": 0.98, "cnn/seed0/pgd": 0.10}, n_claim=20,
                     feature_agreement={"seed0": {"corr": 1.0, "max_abs_diff": 0.0}},
                     spearman={"cnn/pgd/seed0": {"tp_h0": 1.0, "mk_h0": 0.9}}, gradient_rel_error=1e-12)
    det = {t: {"20": {"power": 0.5, "type1": 0.05, "type1_max": 0.05}} for t in exp.TESTS}
    det["TC-SAMMD"]["20"]["power"] = 0.8
    r.summary["detection"] = det
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-attack-moves"] == "PASS" and st["pre-features-differ"] == "FAIL" and st["C4"] == "VOID"
    assert st["C1"] == "PASS"
    r.summary["feature_agreement"]["seed0"]["corr"] = 0.5
    assert {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}["C4"] == "PASS"
    for t in exp.TESTS:
        det[t]["20"]["power"] = 1.0
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-off-ceiling"] == "FAIL" and st["C4"] == "VOID"
    r.summary["accuracy"]["cnn/seed0/pgd"] = 0.98  # the attack did not move the model
    st = {o.id: o.status for o in evaluate_claims(r, exp.CLAIMS)}
    assert st["pre-attack-moves"] == "FAIL" and st["C1"] == "VOID"


@pytest.mark.reproduce
def test_quick_experiment_expected_passes(quick_run):
    from trustlab.experiments import topodetect as exp

    result, _ = quick_run("topodetect")
    status = {c.id: c.status for c in result.claims}
    assert all(status[c] == "PASS" for c in exp.QUICK_EXPECTED_PASS), status
