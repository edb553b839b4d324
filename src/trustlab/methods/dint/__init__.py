"""D-Intervention: distribution-wise representation fine-tuning (D-ReFT) against pointwise LoReFT.

Deng, Chang, Chen, "Learning Distribution-Wise Control in Representation Space for Language Models", ICML 2025
(arXiv:2506.06686, https://github.com/chili-lab/D-Intervention). :class:`LoReFT` and :class:`DReFT` are
ModelEdits that hook one block's residual-stream output at the first/last prompt tokens (prefill only when
generating); :func:`fit_intervention` trains them on the shared trainer with the base model frozen (top-K
replay for late layers); ArithLite/CommonLite generate tasks; :func:`robustness_report` runs the robustness
protocol (activation noise, weight noise, input shifts; D-ReFT under sample and mean inference). D-ReFT's
``sigma_param="official_clamp"`` is the released code (sigma pinned at 0.2, zero gradient);
``"bounded_sigmoid"`` learns sigma. Importing this package imports no torch.
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "LoReFT": "_edit", "DReFT": "_edit", "ReFTInfo": "_edit", "load_intervention": "_edit",
    "InterventionFit": "_fit", "PositionOverlapWarning": "_fit", "fit_intervention": "_fit",
    "tokenize_task": "_fit",
    "InterventionEvaluator": "_evaluate", "RobustnessReport": "_evaluate", "RobustnessRow": "_evaluate",
    "robustness_report": "_evaluate", "normalised_auc": "_evaluate",
    "TaskData": "_tasks", "arith_lite": "_tasks", "digit_sums": "_tasks", "common_lite": "_tasks",
    "load_task_jsonl": "_tasks", "HELD_OUT_FAMILIES": "_tasks", "SUM_TEST_PAIRS": "_tasks",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["LoReFT", "DReFT"], paper="dint", role="model_edit")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
