"""Benchmark: AMUN's cost as a fraction of Retrain's wall time, and RMIA's cost per reference model.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/amun.py [--repeats 3] [--out f.json]``.

Setting: noisy digits (sigma 0.35), MLP 64-256-256-10, train 600. Two Retrains (issue 31 item 6):

* "Retrain to accuracy": from scratch on D_R until its accuracy on D_R reaches the original model's accuracy on
  D_R (checked after every epoch, at most 60 epochs) -- the cheapest retraining that is as accurate as the
  original model;
* "Retrain, 60 epochs": the original recipe's fixed epoch count (what the earlier benchmark measured).

AMUN = the eps_init pilot + Algorithm 1 (cache cleared) + the fine-tune; shown for the paper's 10 epochs and for 20
epochs (what the default experiment's tuning usually picks). Medians over ``repeats``. The paper's target is
<= 0.3x; note that its Retrain is 200 CIFAR epochs against AMUN's 10.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def _setting():
    from trustlab.core.seeding import isolated_global_rng
    from trustlab.data import load_digits_images
    from trustlab.methods import amun as A
    from trustlab.models import MLP

    ds = load_digits_images(noise=0.35, random_state=0)
    X, y = ds.X, np.asarray(ds.y)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(X))
    tr, te = np.sort(perm[:600]), np.sort(perm[600:])
    data = A.UnlearningData(X=X, y=y, train_idx=tr, test_idx=te, num_classes=10)
    with isolated_global_rng(0):
        model = MLP(64, 10, hidden=(256, 256))
    A.sgd_train(model, X[tr], y[tr], A.SGDSpec(epochs=60, lr=0.05), random_state=0)
    return X, y, tr, te, data, model, rng


def _retrains(model, data, f: np.ndarray, repeats: int) -> dict:
    from trustlab.methods import amun as A
    from trustlab.models import predict_logits

    r = data.retain_idx(f)
    target = float(np.mean(predict_logits(model, data.X[r]).argmax(1) == data.y[r]))
    epochs: list[int] = []

    def to_accuracy() -> None:
        h = A.Retrain(epochs=60, weight_decay=0.0, target_accuracy=target, random_state=0).apply(model, f, data)
        epochs.append(h.info.epochs_run)
        h.restore()

    def fixed() -> None:
        A.Retrain(epochs=60, weight_decay=0.0, random_state=0).apply(model, f, data).restore()

    return {"target_accuracy": target, "to_accuracy_s": _median_time(to_accuracy, repeats),
            "to_accuracy_epochs": int(np.median(epochs)), "fixed60_s": _median_time(fixed, repeats)}


def _amun(model, data, f: np.ndarray, variant: str, lr: float, epochs: int, repeats: int) -> dict:
    from trustlab.methods import amun as A
    from trustlab.methods.amun._adversarial import clear_adversarial_cache

    infos = []

    def amun() -> None:
        clear_adversarial_cache()
        h = A.AMUN(variant=variant, lr=lr, epochs=epochs, random_state=0).apply(model, f, data)
        infos.append(h.info)
        h.restore()

    t_am = _median_time(amun, repeats)
    return {"amun_s": t_am, "adv_build_s": float(np.median([i.adv_build_s for i in infos])),
            "finetune_s": float(np.median([i.finetune_s for i in infos]))}


def main(repeats: int = 3, out: str | None = None) -> dict:
    from trustlab.core.threads import limit_threads
    from trustlab.methods import amun as A
    from trustlab.models import MLP, predict_logits

    with limit_threads(1):
        X, y, tr, te, data, model, rng = _setting()
        report: dict = {"setting": "noisy digits, MLP 64-256-256-10, train 600", "repeats": repeats, "rows": []}
        print(report["setting"])
        for size in (60, 100):
            f = np.sort(rng.choice(tr, size, replace=False))
            re = _retrains(model, data, f, repeats)
            print(f"forget {size:3d}  Retrain to the original's D_R accuracy {re['target_accuracy']:.3f}: "
                  f"{re['to_accuracy_s']:.3f} s ({re['to_accuracy_epochs']} epochs); Retrain 60 epochs {re['fixed60_s']:.3f} s")
            for variant, lr in (("amun", 0.2), ("advonly", 0.1)):
                for epochs in (10, 20):
                    am = _amun(model, data, f, variant, lr, epochs, repeats)
                    row = {"forget": size, "variant": variant, "epochs": epochs, **re, **am,
                           "ratio_to_accuracy": am["amun_s"] / re["to_accuracy_s"],
                           "ratio_fixed60": am["amun_s"] / re["fixed60_s"]}
                    report["rows"].append(row)
                    print(f"  AMUN[{variant:7s}] {epochs:2d} ep: {am['amun_s']:6.3f} s (D_A {am['adv_build_s']:.3f} s + "
                          f"fine-tune {am['finetune_s']:.3f} s)  ratio {row['ratio_to_accuracy']:5.2f}x (to accuracy), "
                          f"{row['ratio_fixed60']:5.2f}x (60 epochs)")
        # RMIA: reference models on complementary halves of all 1,797 points, plus one scoring pass
        refs = A.fit_reference_models(lambda: MLP(64, 10, hidden=(256, 256)), X, y, 4,
                                      spec=A.SGDSpec(epochs=60, lr=0.05), random_state=0)
        lg = predict_logits(model, X)
        f = np.sort(rng.choice(tr, 100, replace=False))
        t_score = _median_time(lambda: A.rmia_scores(lg, refs, y, np.r_[f, te]), repeats)
    report["rmia_per_ref_s"] = refs.per_model_s
    report["rmia_score_s"] = t_score
    print(f"RMIA: {refs.per_model_s:.3f} s per reference model (60 epochs on ~898 points); "
          f"scoring {len(f) + len(te)} candidates {t_score * 1e3:.2f} ms")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return report


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    main(a.repeats, a.out)
