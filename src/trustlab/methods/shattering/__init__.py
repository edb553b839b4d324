"""Representation shattering under knowledge editing: a synthetic cyclic knowledge graph, ROME/AlphaEdit/FT-L
editors for Llama-architecture models, and the shattering metric.

Nishi et al., "Representation Shattering in Transformers: A Synthetic Study with Knowledge Editing", ICML 2025
(arXiv:2410.17194). :class:`CyclicKG` builds the world (entities on random cyclic orders, 24 relations,
held-out logical-inference facts, random walks); :func:`make_kg_model` / :func:`train_kg_model` the small
decoder; :class:`ROME`, :class:`AlphaEdit` and :class:`FineTuneEdit` are ModelEdits that serve the synthetic
model and SmolLM2 through :mod:`trustlab.llm`'s site table; :func:`shattering` is
``R(D*) = ||D* - D0||_F / ||D0||_F``; :func:`diagnose_edit` measures any edit of any model's entity prompts.
Importing this package imports no torch.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "CyclicKG": "_kg",
    "FactAccuracy": "_model", "fact_accuracy": "_model", "make_kg_model": "_model",
    "query_tokens": "_model", "train_kg_model": "_model",
    "DistanceZeroWarning": "_requests", "EditRequest": "_requests", "KeyStats": "_requests",
    "down_proj": "_requests", "key_covariance": "_requests", "kg_request": "_requests", "text_request": "_requests",
    "ROME": "_editors", "AlphaEdit": "_editors", "EditorInfo": "_editors", "FineTuneEdit": "_editors",
    "SingularCovarianceWarning": "_editors",
    "EditDiagnosis": "_metrics", "diagnose_edit": "_metrics", "extract_representations": "_metrics",
    "isomap_embedding": "_metrics", "neighbour_adjacency": "_metrics", "pairwise_distances": "_metrics",
    "ring_figure": "_metrics", "ring_spearman": "_metrics", "shattering": "_metrics",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["ROME", "AlphaEdit", "FineTuneEdit"], paper="shattering",
                         role="model_edit")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
