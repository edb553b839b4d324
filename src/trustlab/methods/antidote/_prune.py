"""Antidote (Wanda on harmful calibration data, per-row top-alpha mask, prune) and its ablations as ModelEdits.

``Antidote(dense_ratio, scope, calibration).apply(model)`` collects the input statistics of every target
linear on the calibration set, scores its weights (Wanda), zeroes the top ``dense_ratio`` fraction of each
output row and records the pruned count per module on ``handle.info``; ``handle.restore()`` gives back the
exact weights. An edit that prunes nothing raises instead of reporting success (the official code applies
its mask with ``if name in bad_mask`` and silently does nothing when peft's names drift). The ablations use
the same targets and per-row counts: :class:`MagnitudePrune` (``S = |W|``) and :class:`RandomPrune`
(random scores); the benign-calibration ablation is ``Antidote(calibration=benign_data)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trustlab.core.base import PaperInfo
from trustlab.core.constraints import Boolean, Interval, Options
from trustlab.core.exceptions import ConfigError
from trustlab.core.hashing import content_hash
from trustlab.core.roles import EditHandle, EditInfo, ModelEdit
from trustlab.methods.antidote._paper import PAPER

__all__ = ["Antidote", "MagnitudePrune", "RandomPrune", "PruneInfo", "PruneRoundingWarning"]


class PruneRoundingWarning(UserWarning):
    """``dense_ratio`` rounds to zero weights per row in some target modules (rows shorter than
    ``1 / dense_ratio``, e.g. LoRA's ``lora_B`` whose rows have ``r`` entries): those modules are not pruned."""


@dataclass
class PruneInfo(EditInfo):
    """What a prune did: targets, weights masked and actually zeroed (per module), calibration size, times."""

    dense_ratio: float = 0.0
    scope: str = ""
    n_targets: int = 0
    n_weights: int = 0
    n_masked: int = 0
    n_pruned: int = 0
    pruned_per_module: dict[str, int] = field(default_factory=dict)
    #: target modules where int(in_features * dense_ratio) = 0, so no weight of theirs can be pruned
    rounded_to_zero: list[str] = field(default_factory=list)
    n_calibration: int = 0
    n_tokens: int = 0
    stats_time_s: float = 0.0
    mask_time_s: float = 0.0
    mask_hash: str = ""


def _toy_inputs() -> dict[str, Any]:
    import numpy as np

    from trustlab.testing._inputs import tiny_torch_model

    return {"model": tiny_torch_model, "args": (), "kwargs": {},
            "forward_input": np.random.default_rng(0).normal(size=(5, 4))}


_COMMON: dict[str, list[Any]] = {
    "dense_ratio": [Interval("real", 0, 1, closed="neither")], "scope": [Options(("lora", "merged"))],
    "modules": [list, tuple], "layers": [list, tuple, str, None],
}


def _warn_rounding(owner: str, dense_ratio: float, scores: dict[str, Any]) -> list[str]:
    """Names of the target modules whose rows are too short for ``dense_ratio`` to prune one weight, with a
    :class:`PruneRoundingWarning` naming each of them (issue 47)."""
    import warnings

    zero = sorted(n for n, s in scores.items() if int(s.shape[1] * float(dense_ratio)) == 0)
    if zero:
        widths = sorted({int(scores[n].shape[1]) for n in zero})
        warnings.warn(f"{owner}: dense_ratio={dense_ratio} prunes no weight in {len(zero)} of {len(scores)} target "
                      f"module(s), whose rows have {widths} input(s) (int(in_features * dense_ratio) = 0; e.g. LoRA's "
                      f"lora_B, whose rows have r entries): {', '.join(zero)}. Raise dense_ratio to >= "
                      f"{1 / min(widths):.3g} or the LoRA rank to prune them.", PruneRoundingWarning, stacklevel=4)
    return zero


class _Prune(ModelEdit):
    """Shared apply: targets -> scores -> per-row top-``dense_ratio`` mask -> zero, with the non-zero check."""

    paper: ClassVar[PaperInfo] = PAPER
    _info_class = PruneInfo
    tags: ClassVar[dict[str, Any]] = {"requires": ("torch",)}

    @classmethod
    def _get_test_inputs(cls) -> dict[str, Any]:
        return _toy_inputs()

    def _scores(self, model: Any, targets: dict[str, Any], info: PruneInfo, tokenizer: Any) -> dict[str, Any]:
        raise NotImplementedError  # pragma: no cover - abstract

    def _apply(self, model: Any, handle: EditHandle, tokenizer: Any = None) -> None:
        import torch

        from trustlab.methods.antidote._wanda import prune_targets, row_topk_mask

        info: PruneInfo = handle.info  # type: ignore[assignment]
        targets = prune_targets(model, self.scope, list(self.modules), self.layers)
        t0 = time.perf_counter()
        scores = self._scores(model, targets, info, tokenizer)
        t1 = time.perf_counter()
        masks = {n: row_topk_mask(s, self.dense_ratio) for n, s in scores.items()}
        info.rounded_to_zero = _warn_rounding(type(self).__name__, self.dense_ratio, scores)
        per_module: dict[str, int] = {}
        with torch.no_grad():
            for n, mod in targets.items():
                m = masks[n].to(mod.weight.device)
                per_module[n] = int((mod.weight[m] != 0).sum())
                mod.weight.masked_fill_(m, 0.0)
        info.dense_ratio, info.scope, info.n_targets = float(self.dense_ratio), self.scope, len(targets)
        info.n_weights = sum(int(m.weight.numel()) for m in targets.values())
        info.n_masked = sum(int(m.sum()) for m in masks.values())
        info.n_pruned, info.pruned_per_module = sum(per_module.values()), per_module
        info.stats_time_s, info.mask_time_s = t1 - t0, time.perf_counter() - t1
        info.mask_hash = content_hash({n: m.numpy() for n, m in sorted(masks.items())})
        if info.n_pruned == 0:
            raise ConfigError(
                f"{type(self).__name__} pruned 0 weights in {len(targets)} target module(s) (dense_ratio="
                f"{self.dense_ratio}: {info.n_masked} weights masked, all already zero or int(in_features * "
                "dense_ratio) = 0). Refusing to report success; check the scope, the modules and dense_ratio.")
        self.masks_ = masks


class Antidote(_Prune):
    """Antidote's one-shot prune: Wanda scores on harmful calibration data, per-row top-``dense_ratio`` mask.

    Parameters
    ----------
    dense_ratio : float in (0, 1), default=0.1
        Fraction of each output row pruned (the paper's mask ratio alpha; 0.1 in the code's defaults).
    scope : {"lora", "merged"}, default="lora"
        ``"lora"``: the fine-tuning adapter's ``lora_A`` / ``lora_B`` weights (the paper); ``"merged"``: the
        named modules' own weights (a merged model, or any torch model with named linears).
    calibration : SequenceSet, PolicyForward, list of str, list of (prompt, response), or tensor
        The realignment set (harmful prompt -> harmful answer). Texts are tokenised with the model's tokenizer
        (pairs through the chat template); a :class:`~trustlab.llm.PolicyForward` reuses its replay cache; a
        tensor is fed to ``model(x)`` in chunks (any torch model). Pads and position 0 are excluded for tokens.
    modules : list of str, default=("q_proj", "k_proj", "v_proj")
        Target modules (suffixes, or exact names for a non-LLM model).
    layers : list of int, "topK" or None
        LLM blocks to prune (None: every adapted / matching block).
    replay : bool, default=True
        Collect the statistics through top-K prefix replay when every target sits in the top K blocks.
    batch_size : int, default=8
    system : str, optional
        System prompt of the chat template for (prompt, response) calibration pairs.
    forbid : list of str, optional
        Prompts that must not occur in the calibration set (the evaluation / attack prompts): an overlap is an
        error (leakage).
    """

    _constraints: ClassVar[dict[str, list[Any]]] = {
        **_COMMON, "calibration": "no_validation", "replay": [Boolean()], "batch_size": [Interval(int, 1, None)],
        "system": [str, None], "forbid": [list, tuple, None],
    }

    def __init__(self, *, dense_ratio: float = 0.1, scope: str = "lora", calibration: Any = None,
                 modules: Any = ("q_proj", "k_proj", "v_proj"), layers: Any = None, replay: bool = True,
                 batch_size: int = 8, system: str | None = None, forbid: Any = None) -> None:
        self.dense_ratio, self.scope, self.calibration = dense_ratio, scope, calibration
        self.modules, self.layers, self.replay, self.batch_size = modules, layers, replay, batch_size
        self.system, self.forbid = system, forbid

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        import numpy as np

        calib = np.random.default_rng(1).normal(size=(6, 4)).astype("float32")
        return [{"dense_ratio": 0.25, "scope": "merged", "modules": ["0", "2"], "calibration": calib}]

    def _scores(self, model: Any, targets: dict[str, Any], info: PruneInfo, tokenizer: Any) -> dict[str, Any]:
        from trustlab.methods.antidote._calibration import calibration_batches
        from trustlab.methods.antidote._wanda import collect_input_norms, wanda_scores

        if self.calibration is None:
            raise ConfigError("Antidote needs a calibration set (the realignment data): pass calibration=...")
        batches, skip_first = calibration_batches(model, self.calibration, targets, tokenizer=tokenizer,
                                                  batch_size=self.batch_size, replay=self.replay,
                                                  system=self.system, forbid=self.forbid)
        norms, info.n_calibration, info.n_tokens = collect_input_norms(model, targets, batches, skip_first=skip_first)
        return {n: wanda_scores(m.weight.detach(), norms[n]) for n, m in targets.items()}


class MagnitudePrune(_Prune):
    """Ablation: the same per-row count as :class:`Antidote`, scored by ``|W|`` only (the code's
    ``sample_num=0``). Parameters as :class:`Antidote` without the calibration."""

    _constraints: ClassVar[dict[str, list[Any]]] = dict(_COMMON)

    def __init__(self, *, dense_ratio: float = 0.1, scope: str = "lora", modules: Any = ("q_proj", "k_proj", "v_proj"),
                 layers: Any = None) -> None:
        self.dense_ratio, self.scope, self.modules, self.layers = dense_ratio, scope, modules, layers

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"dense_ratio": 0.25, "scope": "merged", "modules": ["0", "2"]}]

    def _scores(self, model: Any, targets: dict[str, Any], info: PruneInfo, tokenizer: Any) -> dict[str, Any]:
        return {n: m.weight.detach().abs().float() for n, m in targets.items()}


class RandomPrune(_Prune):
    """Ablation: a random ``dense_ratio`` fraction of each output row (the code's ``random_prune``, made
    per-row so the count equals Antidote's). ``random_state`` seeds the draw."""

    tags: ClassVar[dict[str, Any]] = {"stochastic": True, "requires": ("torch",)}
    _constraints: ClassVar[dict[str, list[Any]]] = {**_COMMON, "random_state": ["random_state"]}

    def __init__(self, *, dense_ratio: float = 0.1, scope: str = "lora", modules: Any = ("q_proj", "k_proj", "v_proj"),
                 layers: Any = None, random_state: Any = None) -> None:
        self.dense_ratio, self.scope, self.modules, self.layers = dense_ratio, scope, modules, layers
        self.random_state = random_state

    @classmethod
    def _get_test_params(cls) -> list[dict[str, Any]]:
        return [{"dense_ratio": 0.25, "scope": "merged", "modules": ["0", "2"], "random_state": 0}]

    def _scores(self, model: Any, targets: dict[str, Any], info: PruneInfo, tokenizer: Any) -> dict[str, Any]:
        from trustlab.core.seeding import torch_generator

        gen = torch_generator(int(self._rng.integers(0, 2**31 - 1)))
        return {n: _torch_rand(m.weight.shape, gen) for n, m in sorted(targets.items())}



def _torch_rand(shape: Any, gen: Any) -> Any:
    import torch

    return torch.rand(tuple(shape), generator=gen)

