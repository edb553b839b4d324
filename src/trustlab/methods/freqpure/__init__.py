"""FreqPure (ICML 2025): diffusion-based adversarial purification guided in the frequency domain, with
DiffPure and adaptive attacks built in.

Pei, Ma, Sun, Xu, Huang, "Diffusion-based Adversarial Purification from the Perspective of the Frequency
Domain" (arXiv:2505.01267, https://github.com/GaozhengPei/FreqPure). Light to import: torch loads only
when a name below is used.

* Purifiers: :class:`FreqPure` (ASE + PSP, ``reference``/``projection`` switches, multi-round, votes) and
  :class:`DiffPure` (Nie et al. 2022, DDPM/DDIM discretisation); ``purify_tensor`` is differentiable.
* Attacks: :class:`TransferPGD` (torchattacks), :class:`PGDEOT` (full gradient through the purifier),
  :class:`BPDAEOT`, :class:`SurrogatePGDEOT`, :class:`AutoAttackRand` (torchattacks' AutoAttack, rand version);
  L-inf and L2, budget always respected.
* :func:`evaluate_defence` (clean, transfer and adaptive accuracy in one table), :func:`defended_predict`.
* :func:`spectral_damage` (per-radius amplitude/phase damage) and the FFT pieces (:func:`freq_guide`...).
* The diffusion model: :class:`EpsUNet`, :class:`DiffusionModel`, :func:`train_ddpm`, :func:`save_ddpm`,
  :func:`load_ddpm`, :func:`load_shipped_ddpm` (16x16 digits, shipped as package data, fingerprinted).
"""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports
from trustlab.core.registry import METHODS

_LAZY = {
    "PAPER": "_paper",
    "DiffPure": "_purify", "FreqPure": "_purify",
    "TransferPGD": "_attacks", "PGDEOT": "_attacks", "BPDAEOT": "_attacks", "SurrogatePGDEOT": "_attacks",
    "AutoAttackRand": "_attacks",
    "DefenceReport": "_evaluate",
    "defended_predict": "_evaluate", "evaluate_defence": "_evaluate", "default_attacks": "_evaluate",
    "spectral_damage": "_spectral", "amplitude_phase": "_spectral",
    "from_amplitude_phase": "_spectral", "freq_guide": "_spectral", "band_mask": "_spectral",
    "radius_map": "_spectral", "max_radius": "_spectral", "default_radius": "_spectral",
    "EpsUNet": "_unet",
    "DiffusionModel": "_diffusion", "train_ddpm": "_diffusion",
    "save_ddpm": "_diffusion", "load_ddpm": "_diffusion", "ddpm_from_bytes": "_diffusion",
    "load_shipped_ddpm": "_shipped", "shipped_provenance": "_shipped", "digits16_split": "_shipped",
}

METHODS.register_exports(__name__, _LAZY, ["DiffPure", "FreqPure"], paper="freqpure", role="purifier")
METHODS.register_exports(__name__, _LAZY, ["TransferPGD", "PGDEOT", "BPDAEOT", "SurrogatePGDEOT", "AutoAttackRand"],
                         paper="freqpure",
                         role="attack")

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
