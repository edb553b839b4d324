"""Issue 43: classes of bad input that used to give torch errors or silent nonsense, one example per class
(shape agreement between data and model, degenerate sizes, non-finite values, dtype)."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.core.exceptions import TrustlabError


def test_data_whose_features_do_not_fit_the_model_is_named():
    import torch

    from trustlab.methods.amun import adversarial_set

    net = torch.nn.Linear(4, 3)
    X = np.random.default_rng(0).random((6, 5)).astype("float32")  # 5 features for a 4-input model
    with pytest.raises(TrustlabError, match="'X' argument of adversarial_set does not fit the model.*5 features"):
        adversarial_set(net, X, np.zeros(6, int), eps_init=0.1)


@pytest.mark.parametrize("case", ["one-class logits", "3-row redundancy", "5-row audit"])
def test_degenerate_sizes_are_refused(case):
    from trustlab.methods import amun, xhacking

    rng = np.random.default_rng(0)
    with pytest.raises(TrustlabError, match=r">= 2 classes|at least 10 sample|at least 20 rows"):
        if case == "one-class logits":
            amun.threshold_scores(np.zeros((4, 1)), np.zeros(4, int))  # was inf for every row
        elif case == "3-row redundancy":
            xhacking.redundancy(rng.normal(size=(3, 4)), 0)  # was R^2 = -63
        else:
            xhacking.XHackingAudit(progress=False).audit(rng.normal(size=(5, 3)), np.array([0, 1, 0, 1, 0]))


def test_non_finite_metrics_are_refused():
    from trustlab.methods.amun import avg_gap

    ref = {"UA": 1.0, "RA": 1.0, "TA": 1.0, "AUC": 50.0}
    with pytest.raises(TrustlabError, match="finite"):
        avg_gap({**ref, "UA": float("nan")}, ref)  # was nan
    assert avg_gap(ref, ref) == 0.0


def test_wrong_dtypes_are_refused():
    from trustlab.methods.deception import Message
    from trustlab.methods.fedceo import UDPFedAvg

    with pytest.raises(TrustlabError, match="must hold numbers"):
        UDPFedAvg().aggregate([np.array([True, False]), np.array([False, True])])  # was [0.5, 0.5]
    with pytest.raises(TrustlabError, match="'detect' of a Message must be True or False"):
        Message("user", "hi", detect="yes")
    assert Message("user", "hi", detect=np.bool_(True)).detect
