"""Quick gates that mean something (issue 39; the rule is in docs/design.md, "Premises, VOID, knockouts").

Every experiment declares >= 1 premise, a KNOCKOUT that the quick config accepts and that changes it, and a
non-empty gate of primary claims or premises. Marker reproduce: under its KNOCKOUT no gated claim PASSes.
Marker slow: every gated claim PASSes on >= 4 of the 5 quick seeds (``python -m trustlab.experiments._gates``).
"""

from __future__ import annotations

import dataclasses

import pytest

from trustlab.experiments import experiment_ids, get_experiment, run_experiment
from trustlab.experiments._gates import MIN_PASSES, N_SEEDS, gate_table
from trustlab.experiments.runner import apply_overrides

IDS = experiment_ids()


@pytest.mark.parametrize("exp_id", IDS)
def test_experiment_declares_premises_a_knockout_and_a_gate(exp_id):
    exp = get_experiment(exp_id)
    assert exp.premises, f"{exp_id}: no Premise in CLAIMS (what shows the mechanism ran?)"
    assert any(c.requires for c in exp.claims if c.kind == "claim"), f"{exp_id}: no claim rests on a premise"
    assert exp.knockout, f"{exp_id}: no KNOCKOUT"
    quick = exp.config_cls.quick()
    knocked = apply_overrides(quick, exp.knockout)
    assert dataclasses.asdict(knocked) != dataclasses.asdict(quick), f"{exp_id}: the KNOCKOUT changes nothing"
    gate = exp.quick_expected_pass
    void = getattr(exp.module, "VOID_SETTING", None)
    if void is not None:  # an honest empty gate: the run cannot exercise the mechanism at this scale
        assert not gate and isinstance(void, str) and len(void) > 40, f"{exp_id}: VOID_SETTING needs a reason"
        assert any(c.kind == "premise" for c in exp.claims)
    else:
        assert gate, f"{exp_id}: empty QUICK_EXPECTED_PASS (declare VOID_SETTING with the reason if honest)"
    secondary = [c.id for c in exp.claims if c.secondary and c.id in gate]
    assert not secondary, f"{exp_id}: secondary lines in the gate: {secondary}"


@pytest.mark.reproduce
@pytest.mark.parametrize("exp_id", IDS)
def test_no_gated_claim_passes_under_the_knockout(exp_id):
    exp = get_experiment(exp_id)
    result, _ = run_experiment(exp_id, "quick", out_dir=None, show_progress=False, knockout=True)
    assert result.error is None
    status = {c.id: c for c in result.claims}
    still = {i: (status[i].observed, status[i].threshold) for i in exp.quick_expected_pass or ()
             if status[i].status == "PASS"}
    assert not still, f"{exp_id}: gated claims PASS with the mechanism switched off (by construction): {still}"


@pytest.mark.slow
@pytest.mark.timeout(5400)  # six isolated quick runs (an LLM experiment's take 1-9 min each on 2 loaded cores)
@pytest.mark.parametrize("exp_id", IDS)
def test_every_gated_claim_passes_on_four_of_five_quick_seeds(exp_id):
    exp = get_experiment(exp_id)
    table = gate_table(exp_id, n_seeds=N_SEEDS, knockout=False)
    weak = {i: table.statuses.get(i) for i in exp.quick_expected_pass or () if table.passes(i) < MIN_PASSES}
    assert not weak, f"{exp_id}: gated claims PASS on fewer than {MIN_PASSES}/{N_SEEDS} quick seeds: {weak}"
