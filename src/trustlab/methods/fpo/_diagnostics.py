"""How much of the FPO loss gradient the feature term carries (issue 47): the experiment's premise and the
aligner's negligible-term warning share this one measurement."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FeatureTermWarning", "feature_share", "MAX_ROWS", "NEGLIGIBLE_SHARE"]

MAX_ROWS = 32  # training pairs in the gradient comparison
#: below this share of the loss gradient the feature term is negligible (the experiment's premise threshold)
NEGLIGIBLE_SHARE = 0.10


class FeatureTermWarning(UserWarning):
    """FPO's feature term carries a negligible share of the loss gradient: the run is length-normalised DPO in
    all but name (raise ``alpha``, or check the SAE's scale against the activations')."""


def _grads(obj: Any, rows: np.ndarray, params: list[Any]) -> tuple[Any, float]:
    import torch

    out = obj(rows)
    g = torch.autograd.grad(out.loss, params, allow_unused=True)
    flat = torch.cat([(x if x is not None else torch.zeros_like(p)).reshape(-1) for x, p in zip(g, params,
                                                                                                 strict=True)])
    return flat.detach().double(), float(out.loss.detach())


def feature_share(obj: Any, n_pairs: int) -> dict[str, float]:
    """Share of the loss gradient (and value) due to the feature term, on the first training pairs.

    ``grad_share = ||g - g0|| / ||g||`` where ``g`` is the FPO loss gradient in the trainable weights and ``g0``
    the gradient of the same loss with ``alpha = 0`` at the same weights (length-normalised DPO);
    ``loss_share = |L - L0| / L``. Both are 0 when ``obj.alpha == 0``.
    """
    params = [p for p in obj.forward.model.parameters() if p.requires_grad]
    rows = np.arange(min(MAX_ROWS, int(n_pairs)))
    alpha = obj.alpha
    try:
        g, loss = _grads(obj, rows, params)
        obj.alpha = 0.0
        g0, loss0 = _grads(obj, rows, params)
    finally:
        obj.alpha = alpha
    gn = float(g.norm())
    return {"grad_share": float((g - g0).norm()) / max(gn, 1e-30), "grad_norm": gn, "grad_norm_no_feature":
            float(g0.norm()), "loss_share": abs(loss - loss0) / max(abs(loss), 1e-30), "loss": loss,
            "n_pairs": float(len(rows))}
