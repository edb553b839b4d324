"""``FPOAligner``: align a causal LM with FPO on preference data in one call (a ModelEdit).

``FPOAligner(...).apply(model, data, tokenizer)`` tokenises the pairs (chat template), adds LoRA to the
top blocks, collects the reference model's last-block activations at response tokens, trains the TopK SAE,
computes the offline reference caches (log-probs and pooled features), trains with
:class:`FPOObjective` through :func:`trustlab.llm.train` and merges the adapter into the model's weights in
place. ``handle.restore()`` gives back the exact original weights; the trained SAE, its report and the
training history stay on the aligner (``sae_``, ``sae_report_``, ``history_``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Interval, Options
from trustlab.core.exceptions import ConfigError
from trustlab.core.roles import EditHandle, EditInfo, ModelEdit
from trustlab.methods.fpo._paper import PAPER

__all__ = ["FPOAligner", "FPOInfo"]

_POS_INT = [Interval(int, 1, None)]
_POS = [Interval("real", 0, None, closed="neither")]


@dataclass
class FPOInfo(EditInfo):
    """What :meth:`FPOAligner.apply` did: pairs, steps, final loss, SAE quality and the wall time."""

    n_pairs: int = 0
    steps: int = 0
    final_loss: float = float("nan")
    sae_fve: float = float("nan")
    sae_l0: float = float("nan")
    sae_dead_fraction: float = float("nan")
    #: share of the loss gradient the feature term carries at step 0 (issue 47; < 0.10 warns)
    feature_grad_share: float = float("nan")
    sae_given: bool = False


def _tiny_inputs() -> dict[str, Any]:
    import torch

    from trustlab.data.prefs import make_preferences
    from trustlab.llm import tiny_random_llama

    tok = tiny_random_llama()[1]
    return {"model": lambda: tiny_random_llama(n_layers=2, tokenizer=tok)[0],
            "args": (make_preferences(8, random_state=0),),  # the tokenizer tiny_random_llama attaches
            "forward_input": {"input_ids": torch.tensor([[5, 17, 301, 12, 9]])}}


def _warn_negligible(obj: Any, n_pairs: int, alpha: float) -> float:
    """The feature term's share of the loss gradient at step 0, with a FeatureTermWarning below 10 %."""
    import warnings

    from trustlab.methods.fpo._diagnostics import NEGLIGIBLE_SHARE, FeatureTermWarning, feature_share

    if alpha == 0:
        return 0.0  # asked for: no feature term
    share = feature_share(obj, n_pairs)["grad_share"]
    if share < NEGLIGIBLE_SHARE:
        warnings.warn(f"FPOAligner: the feature term carries {100 * share:.2g} % of the loss gradient at step 0 "
                      f"(alpha={alpha}; < {100 * NEGLIGIBLE_SHARE:.0f} %): the run is close to length-normalised DPO. "
                      "Raise alpha, or check the SAE's input scale against the model's activations.",
                      FeatureTermWarning, stacklevel=5)
    return float(share)


class FPOAligner(ModelEdit):
    """FPO alignment of a causal LM on (prompt, chosen, rejected) data; LoRA merged into the weights.

    Parameters
    ----------
    beta, alpha, k : FPO's settings (paper: 0.1, 0.5; k top features per sequence)
    sae : SparseAutoencoder or dict, optional
        A pretrained SAE for the last block's residual stream (yours, e.g. trained elsewhere), or its state dict
        (``W_enc`` / ``W_dec`` / ``b_enc`` / ``b_dec`` [/ ``scale``], or ``encoder.weight`` / ``encoder.bias`` /
        ``decoder.weight`` / ``decoder.bias``, see :meth:`SparseAutoencoder.from_state_dict`, read with
        ``sae_k``). None trains a TopK SAE of ``sae_width`` features first. Either way, if the feature term
        carries < 10 % of the loss gradient at step 0 (``info.feature_grad_share``), a ``FeatureTermWarning``
        says so (issue 47).
    sae_width, sae_k, sae_steps : the TopK SAE trained on the model's own activations
    layers : str or list, default="top4"
        LoRA blocks (:func:`trustlab.llm.add_lora`); with the top blocks the bottom is cached (replay).
    r, lora_alpha : LoRA rank and scale
    steps, batch_size, lr, warmup_steps : the shared trainer's settings
    system : str, optional
        System prompt of the chat template (None: the tokenizer's default).
    random_state : int, Generator or None
    """

    paper: ClassVar[PaperInfo] = PAPER
    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch", "transformers", "peft")}
    _info_class = FPOInfo
    _constraints: ClassVar[dict[str, list[Any]]] = {
        "beta": _POS, "alpha": [Interval("real", 0, None)], "k": _POS_INT, "sae_width": _POS_INT, "sae_k": _POS_INT,
        "sae_steps": _POS_INT, "layers": [str, list, tuple], "r": _POS_INT, "lora_alpha": _POS, "steps": _POS_INT,
        "batch_size": _POS_INT, "lr": _POS, "warmup_steps": [Interval(int, 0, None)], "system": [str, None],
        "mode": [Options(("paper", "official"))], "sae": "no_validation",
        "random_state": ["random_state"],
    }

    def __init__(self, *, beta: float = 0.1, alpha: float = 0.5, k: int = 32, sae_width: int = 2048, sae_k: int = 32,
                 sae_steps: int = 600, layers: Any = "top4", r: int = 8, lora_alpha: float = 16.0, steps: int = 50,
                 batch_size: int = 8, lr: float = 1e-4, warmup_steps: int = 0, system: str | None = None,
                 mode: str = "paper", sae: Any = None, random_state: Any = None) -> None:
        self.beta, self.alpha, self.k = beta, alpha, k
        self.sae_width, self.sae_k, self.sae_steps = sae_width, sae_k, sae_steps
        self.layers, self.r, self.lora_alpha = layers, r, lora_alpha
        self.steps, self.batch_size, self.lr, self.warmup_steps = steps, batch_size, lr, warmup_steps
        self.system, self.mode, self.sae, self.random_state = system, mode, sae, random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"k": 4, "sae_width": 32, "sae_k": 4, "sae_steps": 5, "layers": "top1", "r": 2, "steps": 2,
                 "batch_size": 2, "random_state": 0}]

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return _tiny_inputs()

    def _pairs(self, data: Any, tokenizer: Any) -> Any:
        from trustlab.data.prefs import PreferenceData, load_preferences
        from trustlab.llm import tokenize_preferences

        if isinstance(data, str | os.PathLike):
            data = load_preferences(data)
        if not isinstance(data, PreferenceData):
            raise ConfigError("The 'data' argument of FPOAligner.apply must be PreferenceData or the path of a JSONL "
                              f"file with prompt/chosen/rejected. Got {type(data).__name__} instead.")
        return tokenize_preferences(tokenizer, data.prompts, data.chosen, data.rejected, system=self.system)

    def _apply(self, model: Any, handle: EditHandle, data: Any, tokenizer: Any = None) -> None:
        from trustlab.llm import PolicyForward, add_lora, train
        from trustlab.methods.fpo._objective import FPOObjective
        tok = tokenizer if tokenizer is not None else getattr(model, "trustlab_tokenizer", None)
        if tok is None:
            raise ConfigError("FPOAligner.apply needs the model's tokenizer: pass tokenizer=... (load_model attaches "
                              "one to the models it loads).")
        if self.sae_k > self.sae_width or self.k > self.sae_width:
            raise ConfigError(f"FPOAligner needs sae_k and k <= sae_width={self.sae_width}. Got sae_k={self.sae_k}, "
                              f"k={self.k}.")
        pairs = self._pairs(data, tok)
        seed = int(self._rng.integers(0, 2**31 - 1))
        peft_model = add_lora(model, layers=self.layers, r=self.r, alpha=float(self.lora_alpha), random_state=seed)
        try:
            fwd = PolicyForward(peft_model, pairs.sequences)
            site = "resid" if self.mode == "paper" else "final_norm"
            sae, rep = self._sae(fwd, site, seed)
            obj = FPOObjective(fwd, pairs, sae, beta=float(self.beta), alpha=float(self.alpha), k=self.k,
                               mode=self.mode)
            handle.info.feature_grad_share = _warn_negligible(obj, pairs.n_pairs, float(self.alpha))
            hist = train(peft_model, obj, steps=self.steps, batch_size=self.batch_size, lr=float(self.lr),
                         warmup_steps=self.warmup_steps, random_state=seed)
            peft_model.merge_and_unload()
        except BaseException:
            peft_model.unload()
            raise
        self.sae_, self.sae_report_, self.history_ = sae, rep, hist
        info = handle.info
        info.n_pairs, info.steps, info.final_loss = pairs.n_pairs, len(hist.loss), float(hist.loss[-1])
        info.sae_fve, info.sae_l0, info.sae_dead_fraction = rep.fve, rep.l0, rep.dead_fraction
        info.sae_given = self.sae is not None

    def _sae(self, fwd: Any, site: str, seed: int) -> tuple[Any, Any]:
        """The user's SAE (checked against the model's width, reported on its activations) or a trained one."""
        from trustlab.core.exceptions import InputError
        from trustlab.methods.fpo._sae import SparseAutoencoder, collect_activations, sae_report, train_sae

        acts = collect_activations(fwd, site=site)
        if self.sae is None:
            return train_sae(acts, width=self.sae_width, k=self.sae_k, steps=self.sae_steps, random_state=seed)
        if isinstance(self.sae, SparseAutoencoder):
            sae = self.sae
        elif isinstance(self.sae, dict):
            sae = SparseAutoencoder.from_state_dict(self.sae, k=self.sae_k)
        else:
            raise ConfigError(f"The 'sae' argument of FPOAligner must be None, a SparseAutoencoder or a state dict. "
                              f"Got {type(self.sae).__name__} instead.")
        if sae.d_in != acts.shape[-1]:
            raise InputError(f"The 'sae' argument of FPOAligner has d_in={sae.d_in}, but the model's last block "
                             f"outputs width {acts.shape[-1]}: an SAE trained on another model or site.")
        return sae, sae_report(sae, acts)
