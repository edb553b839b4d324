#!/usr/bin/env bash
# Create an isolated venv with pyDVL 0.10.0 for the optional KNN-Shapley cross-check.
# pyDVL pins numpy<2 (aai-institute/pyDVL#617), so it cannot share trustlab's venv (numpy>=2).
# Usage: bash benchmarks/licensing_pydvl_env.sh [VENV_DIR]   (default /tmp/trustlab-pydvl)
# The test tests/methods/test_licensing.py and benchmarks/licensing.py use it when
# TRUSTLAB_PYDVL_PYTHON points at its python (or /tmp/trustlab-pydvl/bin/python exists); otherwise they skip.
set -euo pipefail
VENV="${1:-/tmp/trustlab-pydvl}"
PY="${PYTHON:-python3.11}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "pydvl==0.10.0" "scikit-learn<1.7"
"$VENV/bin/python" -c "import pydvl, numpy, sklearn; print('pydvl', pydvl.__version__, 'numpy', numpy.__version__, 'sklearn', sklearn.__version__)"
