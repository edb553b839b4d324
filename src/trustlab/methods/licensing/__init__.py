"""Collective licensing: split a licence pool among data contributors by data valuation.

Tooling for "Position: AI Safety Should Prioritize the Future of Work" (Hazra, Majumder, Chakrabarty;
ICML 2025, arXiv:2504.13959), whose recommendation R5 is collective licensing with royalties paid by each
contributor's contribution (it cites Shapley Royalty Share, arXiv:2404.13964). Public objects:

* :class:`CompensationAudit` (Auditor) / :func:`compensation_report` -> :class:`CompensationReport`;
* valuation: :func:`knn_shapley` (exact, O(N log N) per validation point), the owner-level games
  :func:`exact_shapley` (<= 12 players), :func:`msr_banzhaf`, :func:`tmc_shapley`, :func:`loo_values`
  over the utilities :class:`KNNUtility`, :class:`LogisticAccuracy`, :class:`NaiveBayesLogLikelihood`;
* :func:`find_duplicates`, :func:`embedded_duplicates` (perturbed copies), :func:`knn_vote_disagrees`,
  :func:`flag_noisy_labels`; money: :func:`split_pool` (with the rule for a pool with nothing left),
  :func:`largest_remainder`, :func:`to_minor_units`, :func:`minor_unit_of`.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    **dict.fromkeys(("CompensationAudit", "compensation_report"), "_audit"),
    **dict.fromkeys(("CompensationReport", "OwnerLine"), "_report"),
    **dict.fromkeys(("knn_shapley", "knn_vote_disagrees", "flag_noisy_labels"), "_knn"),
    **dict.fromkeys(("Game", "KNNUtility", "LogisticAccuracy", "NaiveBayesLogLikelihood"), "_utilities"),
    **dict.fromkeys(("GameValues", "exact_shapley", "msr_banzhaf", "tmc_shapley", "loo_values"), "_games"),
    **dict.fromkeys(("DuplicateGroups", "find_duplicates", "embedded_duplicates"), "_dedup"),
    **dict.fromkeys(("MINOR_UNITS", "minor_unit_of", "to_minor_units", "largest_remainder", "PoolSplit", "split_pool"),
                    "_payout"),
}
__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["CompensationAudit"], paper="licensing", role="auditor")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
