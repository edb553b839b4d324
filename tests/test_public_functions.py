"""Every exported public function declares its argument rules, and refuses each rule's invalid values."""

from __future__ import annotations

import pytest

from trustlab.core.arguments import declared_args
from trustlab.testing.functions import check_function_refuses_invalid, public_functions

FUNCTIONS = public_functions()
DECLARED = {k: f for k, f in FUNCTIONS.items() if declared_args(f) is not None}

#: TRANSITIONAL (issue 15): functions not yet declared; this list must end empty.
PENDING: set[str] = {
    "trustlab.build_report",
    "trustlab.data.list_text_sets",
    "trustlab.data.list_timeseries",
    "trustlab.data.load_ts_file",
    "trustlab.data.partition_dirichlet",
    "trustlab.data.partition_iid",
    "trustlab.data.partition_shards",
    "trustlab.data.read_jsonl",
    "trustlab.experiment_ids",
    "trustlab.experiments.apply_overrides",
    "trustlab.experiments.evaluate_claims",
    "trustlab.experiments.get_experiment",
    "trustlab.experiments.runner.provenance",
    "trustlab.llm.ablate_heads",
    "trustlab.llm.active_hooks",
    "trustlab.llm.arch_spec",
    "trustlab.llm.available_models",
    "trustlab.llm.cache_root",
    "trustlab.llm.collect",
    "trustlab.llm.dims",
    "trustlab.llm.encode_responses",
    "trustlab.llm.encode_texts",
    "trustlab.llm.file_sha256",
    "trustlab.llm.gather_logprobs",
    "trustlab.llm.generate",
    "trustlab.llm.head_logits",
    "trustlab.llm.head_means",
    "trustlab.llm.last_positions",
    "trustlab.llm.load_embedder",
    "trustlab.llm.load_model",
    "trustlab.llm.load_tokenizer",
    "trustlab.llm.pad_batch",
    "trustlab.llm.patch_activations",
    "trustlab.llm.patch_all_heads",
    "trustlab.llm.position_ids_from_mask",
    "trustlab.llm.prefix.replay_blocks",
    "trustlab.llm.register_model",
    "trustlab.llm.resolve_site",
    "trustlab.llm.run_with_cache",
    "trustlab.llm.score_options",
    "trustlab.llm.score_responses",
    "trustlab.llm.sequence_logprobs",
    "trustlab.llm.sequential_kl",
    "trustlab.llm.site_names",
    "trustlab.llm.sites.base_model",
    "trustlab.llm.sites.get_module",
    "trustlab.llm.sites.resolve_sites",
    "trustlab.llm.sites.unwrap",
    "trustlab.llm.tiny_random_llama",
    "trustlab.llm.token_logprobs",
    "trustlab.llm.trace",
    "trustlab.llm.valid_positions",
    "trustlab.load_digits_images",
    "trustlab.load_table",
    "trustlab.load_tabular",
    "trustlab.load_text",
    "trustlab.load_timeseries",
    "trustlab.methods.amun.adversarial_set",
    "trustlab.methods.amun.avg_gap",
    "trustlab.methods.amun.choose_eps_init",
    "trustlab.methods.amun.clear_adversarial_cache",
    "trustlab.methods.amun.evaluate_unlearning",
    "trustlab.methods.amun.fit_reference_models",
    "trustlab.methods.amun.logits_of",
    "trustlab.methods.amun.mia_auc",
    "trustlab.methods.amun.rmia_scores",
    "trustlab.methods.amun.sgd_train",
    "trustlab.methods.amun.svc_mia",
    "trustlab.methods.amun.taylor_soft_margin",
    "trustlab.methods.amun.threshold_scores",
    "trustlab.methods.discover_methods",
    "trustlab.methods.fedceo.clip_update",
    "trustlab.methods.fedceo.content_key",
    "trustlab.methods.fedceo.fedceo_threshold",
    "trustlab.methods.fedceo.from_three_way",
    "trustlab.methods.fedceo.rdp_epsilon",
    "trustlab.methods.fedceo.run_federated",
    "trustlab.methods.fedceo.smooth_clients",
    "trustlab.methods.fedceo.svt",
    "trustlab.methods.fedceo.to_three_way",
    "trustlab.methods.fedceo.tsvt",
    "trustlab.methods.fedceo.tsvt_reference",
    "trustlab.methods.fedceo.udp_mod",
    "trustlab.methods.fedceo.weighted_mean",
    "trustlab.methods.method_classes",
    "trustlab.methods.softshape.evaluate",
    "trustlab.methods.softshape.mask_top_steps",
    "trustlab.methods.softshape.p1_split",
    "trustlab.methods.softshape.p2_splits",
    "trustlab.methods.softshape.plot_shape_scores",
    "trustlab.methods.softshape.soft_sparsify",
    "trustlab.methods.softshape.tokens_to_steps",
    "trustlab.methods.split.fit_cart",
    "trustlab.methods.split.fit_gosdt",
    "trustlab.methods.split.fit_licketysplit_package",
    "trustlab.methods.split.fit_treefarms",
    "trustlab.methods.split.tree_objective",
    "trustlab.methods.xhacking.achievable_drop",
    "trustlab.methods.xhacking.build_pipeline",
    "trustlab.methods.xhacking.default_space",
    "trustlab.methods.xhacking.explain_pipeline",
    "trustlab.methods.xhacking.make_redundant_classification",
    "trustlab.methods.xhacking.redundancy",
    "trustlab.methods.xhacking.reference_config",
    "trustlab.methods.xhacking.speedup_ci",
    "trustlab.methods.xhacking.tiny_space",
    "trustlab.methods.xhacking.tts_summary",
    "trustlab.methods.xhacking.verify_report",
    "trustlab.methods.xhacking.xhack",
    "trustlab.models.evaluate",
    "trustlab.models.fit_model",
    "trustlab.models.make_model",
    "trustlab.models.predict_proba",
    "trustlab.results.atomic_write_text",
    "trustlab.results.bar_plot",
    "trustlab.results.claims_plot",
    "trustlab.results.latest_results",
    "trustlab.results.line_plot",
    "trustlab.results.new_figure",
    "trustlab.results.report.claims_rows",
    "trustlab.results.report.find_results",
    "trustlab.results.result.atomic_write",
    "trustlab.results.to_jsonable",
    "trustlab.run_experiment",
}


def test_every_public_function_declares_its_arguments():
    undeclared = sorted(k for k in FUNCTIONS if k not in DECLARED and k not in PENDING)
    assert not undeclared, (
        f"{len(undeclared)} exported function(s) declare no argument rules (use "
        f"trustlab.core.arguments.validate_args): {undeclared}"
    )
    stale = sorted(k for k in PENDING if k in DECLARED or k not in FUNCTIONS)
    assert not stale, f"remove from PENDING (declared now or gone): {stale}"


@pytest.mark.parametrize("qualname", sorted(DECLARED))
def test_public_function_refuses_invalid_values(qualname):
    check_function_refuses_invalid(DECLARED[qualname])
