"""Adaptive attacks on LLM watermarks: watermarks, detectors and a preference-tuned paraphraser.

Diaa, Aremu, Lukas, "Optimizing Adaptive Attacks against Watermarks for Language Models", ICML 2025
(arXiv:2410.02440; code nilslukas/ada-wm-evasion and the D-Diaa/MarkLLM fork). Watermarks with one
interface (KGW, Unigram, EXP; SynthID through transformers), keys as objects (only a hash is shown),
threshold calibration at a target FPR, the paper's preference-pair rule, DPO of a LoRA paraphraser on the
shared trainer with the adapter-ratio knob, non-LLM edit baselines, a MiniLM/Gemma quality oracle, and
``wm_robustness`` (a provider's evasion-vs-quality report). Importing this package imports no torch.
"""

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "WatermarkKey": "_keys", "make_keys": "_keys",
    "Detection": "_watermarks", "Calibration": "_watermarks", "CalibrationWarning": "_watermarks",
    "Watermark": "_watermarks", "KGW": "_watermarks", "Unigram": "_watermarks", "EXP": "_watermarks",
    "make_watermark": "_watermarks", "calibrate_threshold": "_watermarks",
    "SynthID": "_synthid",
    "generate_watermarked": "_generation", "text_prompts": "_generation", "paraphrase_messages": "_generation",
    "clean_paraphrase": "_generation", "PARAPHRASE_SYSTEM": "_generation", "N_TEXT_PROMPTS": "_generation",
    "QualityOracle": "_quality", "QualityScores": "_quality", "load_quality_oracle": "_quality",
    "WordDeletion": "_attacks", "TokenShuffle": "_attacks", "SynonymSwap": "_attacks",
    "ParaphraseAttack": "_attacks", "adapter_ratio": "_attacks",
    "PreferenceSet": "_pairs", "build_preference_pairs": "_pairs", "TrainedParaphraser": "_pairs",
    "train_paraphraser": "_pairs",
    "AttackScore": "_robustness", "RobustnessReport": "_robustness", "score_attack": "_robustness",
    "wm_robustness": "_robustness", "StageCache": "_robustness",
}

METHODS.register_exports(__name__, _LAZY, ["WordDeletion", "TokenShuffle", "SynonymSwap", "ParaphraseAttack"],
                         paper="wmattack", role="attack")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
