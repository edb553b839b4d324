"""Collective licensing: split a licence pool among data contributors by data valuation.

Tooling for "Position: AI Safety Should Prioritize the Future of Work" (Hazra, Majumder, Chakrabarty;
ICML 2025, arXiv:2504.13959), whose recommendation R5 is collective licensing with royalties paid by each
contributor's contribution (it cites Shapley Royalty Share, arXiv:2404.13964). Public objects:

* :class:`CompensationAudit` (Auditor) / :func:`compensation_report` -> :class:`CompensationReport`;
* valuation: :func:`knn_shapley` (exact, O(N log N) per validation point), the owner-level games
  :func:`exact_shapley` (<= 12 players), :func:`msr_banzhaf`, :func:`tmc_shapley`, :func:`loo_values`
  over the utilities :class:`KNNUtility`, :class:`LogisticAccuracy`, :class:`NaiveBayesLogLikelihood`;
* :func:`find_duplicates`, :func:`knn_vote_disagrees`, :func:`flag_noisy_labels`; money: :func:`largest_remainder`,
  :func:`to_minor_units`, :func:`minor_unit_of`.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS
from trustlab.methods.licensing._paper import PAPER

__all__ = ["PAPER", "CompensationAudit", "compensation_report", "CompensationReport", "OwnerLine", "knn_shapley",
           "knn_vote_disagrees", "flag_noisy_labels", "Game", "KNNUtility", "LogisticAccuracy", "NaiveBayesLogLikelihood", "GameValues",
           "exact_shapley", "msr_banzhaf", "tmc_shapley", "loo_values", "MAX_EXACT_PLAYERS", "DuplicateGroups",
           "find_duplicates", "MINOR_UNITS", "minor_unit_of", "to_minor_units", "largest_remainder"]

_P = "trustlab.methods.licensing."
_WHERE = {
    "CompensationAudit": _P + "_audit:CompensationAudit",
    "compensation_report": _P + "_audit:compensation_report",
    "CompensationReport": _P + "_report:CompensationReport",
    "OwnerLine": _P + "_report:OwnerLine",
    "knn_shapley": _P + "_knn:knn_shapley",
    "knn_vote_disagrees": _P + "_knn:knn_vote_disagrees",
    "flag_noisy_labels": _P + "_knn:flag_noisy_labels",
    **{n: _P + "_utilities:" + n for n in ("Game", "KNNUtility", "LogisticAccuracy", "NaiveBayesLogLikelihood")},
    **{n: _P + "_games:" + n for n in ("GameValues", "exact_shapley", "msr_banzhaf", "tmc_shapley", "loo_values",
                                        "MAX_EXACT_PLAYERS")},
    "DuplicateGroups": _P + "_dedup:DuplicateGroups",
    "find_duplicates": _P + "_dedup:find_duplicates",
    **{n: _P + "_payout:" + n for n in ("MINOR_UNITS", "minor_unit_of", "to_minor_units", "largest_remainder")},
}

METHODS.register("CompensationAudit", _WHERE["CompensationAudit"], paper="licensing", role="auditor")

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
