"""FedCEO (ICML 2025): differentially private federated learning with tensor low-rank server smoothing.

Light to import: numpy-only operators and aggregators load on first use; the torch simulator, the Opacus
accounting and the Flower strategy load only when their names are used.

* :func:`tsvt` -- the t-SVT prox along the client axis; :func:`fedceo_threshold` -- tau_m = theta^m / (2 lam).
* :class:`FedCEO` and :class:`UDPFedAvg` -- aggregators (role Aggregator; the server round is an explicit
  argument of ``aggregate``); :func:`smooth_clients` -- the functional server step.
* :class:`UDP`, :class:`DPSGD` -- client-side DP mechanisms; :func:`rdp_epsilon`, :func:`dp_epsilon` (Opacus
  RDP and PRV accountants).
* :func:`run_federated` -- the vectorised in-process simulator (torch.func); :func:`client_schedule`.
* :class:`FedCEOStrategy` -- a Flower ``FedAvg`` subclass (Message API) that calls a FedCEO, extra ``fl``.
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "tsvt": "_tsvt", "tsvt_reference": "_tsvt", "svt": "_tsvt", "fedceo_threshold": "_tsvt",
    "FedCEO": "_aggregators", "UDPFedAvg": "_aggregators", "smooth_clients": "_aggregators",
    "LayerCollapsedWarning": "_aggregators",
    "UDP": "_privacy", "DPSGD": "_privacy", "rdp_epsilon": "_privacy", "dp_epsilon": "_privacy",
    "run_federated": "_simulator", "client_schedule": "_simulator",
    "BiasFreeMLP": "_simulator",
    "FedCEOStrategy": "_flower", "udp_mod": "_flower",
}

__all__ = sorted(_LAZY)
METHODS.register_exports(__name__, _LAZY, ["FedCEO", "UDPFedAvg"], paper="fedceo", role="aggregator")
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
