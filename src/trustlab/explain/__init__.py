"""Explanation controls: placebo, randomisation and baseline explanations, sanity verdicts, blinded study exports.

Built for the ICML 2025 position paper "Explainable AI Cannot Advance Without Better User Studies" (Pičulin,
Petek, Ograjenšek, Štrumbelj): every explanation carries its controls and a provenance card, and a user study
can be exported blinded and pre-registered. A layer below the methods (import-linter: methods > explain >
models), so method packages (the X-hacking audit) and the ``trustlab audit`` layer can all use it.

Importing this package is light; shap, torch and captum load when an explainer needs them.
"""

from trustlab.core.lazy import lazy_exports

_LAZY = {
    "explain": "_controls", "attach_controls": "_controls", "explanation_from_values": "_controls",
    "Explanation": "_explanation", "Controls": "_explanation", "ProvenanceCard": "_explanation",
    "ExplainerInput": "_backends",
    "THRESHOLDS": "_sanity", "SanityVerdict": "_sanity", "CheckVerdict": "_sanity", "RankCorrelation": "_sanity",
    "Faithfulness": "_sanity",
    "sample_size": "_power", "achieved_power": "_power",
    "export_study": "_study", "open_key": "_study", "check_blinding": "_study", "condition_values": "_study",
    "StudyExport": "_study",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
