"""pyDVL KNN-Shapley oracle, run inside the isolated pyDVL venv (see licensing_pydvl_env.sh).

Usage: <pydvl-venv>/bin/python benchmarks/licensing_pydvl_oracle.py IN.npz OUT.npz
IN.npz holds X, y, X_val, y_val, k; OUT.npz gets ``values`` (training-index order), ``seconds`` and the
pyDVL / numpy versions. This file imports nothing from trustlab (different numpy).
"""

from __future__ import annotations

import sys
import time
import warnings


def main(src: str, dst: str) -> None:
    import numpy as np

    warnings.filterwarnings("ignore")
    import pydvl
    from pydvl.valuation import Dataset, KNNShapleyValuation
    from sklearn.neighbors import KNeighborsClassifier

    d = np.load(src)
    train, test = Dataset(d["X"], d["y"]), Dataset(d["X_val"], d["y_val"])
    t0 = time.perf_counter()
    val = KNNShapleyValuation(model=KNeighborsClassifier(n_neighbors=int(d["k"])), test_data=test, progress=False)
    val.fit(train)
    res = val.values()
    seconds = time.perf_counter() - t0
    values = np.zeros(len(d["y"]))
    values[np.asarray(res.indices, dtype=int)] = np.asarray(res.values, dtype=float)
    np.savez(dst, values=values, seconds=seconds, pydvl=pydvl.__version__, numpy=np.__version__)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
