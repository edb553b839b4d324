"""Explanation controls (``trustlab.explain``) for the explanations an X-hacking audit reports (issue 23).

An audited explanation is only worth its interval if it is a real explanation of the model: the controls re-explain
a randomised copy of the pipeline, a copy refitted on permuted labels and two placebos with the audit's own
explainer (:func:`explain_pipeline`, same background and rows), and the sanity verdict says whether the
explanation separates from them (see ``docs/papers/xai_controls.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.methods.xhacking._explain import explain_pipeline

__all__ = ["audited_explainer", "pipeline_controls"]


def audited_explainer(n_classes: int, seed: int) -> Any:
    """A ``trustlab.explain`` custom explainer that runs :func:`explain_pipeline` on the (control) model."""

    def explain(inp: Any) -> np.ndarray:
        phi = explain_pipeline(inp.model, inp.background, inp.X, n_classes=n_classes, seed=seed)["phi"]
        if phi.shape[2] == 1:
            return phi[:, :, 0]
        return phi[np.arange(len(inp.X)), :, np.asarray(inp.target, dtype=np.int64)]

    return explain


def pipeline_controls(ctx: Any, config: dict[str, Any], seed: int) -> dict[str, Any]:
    """The sanity verdict (``SanityVerdict.to_dict()``) of the audit's explanation of the pipeline ``config``.

    The explanation is the one the audit scored (``SearchContext.fit_and_explain``, the trial's own seed); the
    control models are re-explained with the same explainer, seeded by ``seed``.
    """
    from trustlab.explain import attach_controls, explanation_from_values

    pipe, expl = ctx.fit_and_explain(config)
    phi = expl["phi"]
    if ctx.n_classes == 2:
        values, target = phi[:, :, -1], 1
    else:
        target = np.argmax(pipe.predict_proba(ctx.X_ex), axis=1)
        values = phi[np.arange(len(ctx.X_ex)), :, target]
    exp = explanation_from_values(values, ctx.X_ex, model=pipe, target=target, feature_names=list(ctx.names),
                                  method="xhacking.explain_pipeline")
    attach_controls(exp, pipe, method=audited_explainer(ctx.n_classes, seed), background=ctx.X_bg,
                    X_train=ctx.X_tr, y_train=ctx.y_tr, n_background=len(ctx.X_bg), cascade=False,
                    random_state=seed)
    return exp.verdict.to_dict()
