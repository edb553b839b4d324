"""Evasion metrics, a stage cache, and the provider-side robustness report ``wm_robustness``.

evasion rate = 1 - TPR at the threshold calibrated to ``fpr`` on unwatermarked texts (the paper's
protocol); joint success = P(not flagged and cosine to the source >= ``cos_threshold``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import InstanceOf, Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.hashing import content_hash
from trustlab.core.roles import Attack
from trustlab.llm.rules import LanguageModel, Tokenizer
from trustlab.methods.wmattack._generation import generate_watermarked
from trustlab.methods.wmattack._quality import QualityOracle
from trustlab.methods.wmattack._watermarks import Detection, Watermark

__all__ = ["AttackScore", "RobustnessReport", "score_attack", "wm_robustness", "StageCache"]


@dataclass(frozen=True)
class AttackScore:
    """One attack against one watermark: ``evasion`` (1 - TPR at the calibrated threshold), mean ``cosine``,
    ``joint`` success, mean ``cost``, texts ``n`` and ``n_undecided`` (too short: counted as not flagged),
    mean ``perplexity`` (NaN without a perplexity model)."""

    attack: str
    evasion: float
    cosine: float
    joint: float
    cost: float
    n: int
    n_undecided: int
    perplexity: float


def _detection_example() -> Detection:
    one = np.ones(1)
    return Detection(one, one, np.zeros(1, bool), np.ones(1, int), np.ones(1, bool), 1e-4, "kgw", "0" * 12)


@validate_args(_example=lambda: {"attack": "x", "detection": _detection_example(), "cosine": [1.0]},
               attack=[InstanceOf(str)], detection=[InstanceOf(Detection)],
               cosine=[SequenceOf(Interval(float, -1.0001, 1.0001)), InstanceOf(np.ndarray)],
               cos_threshold=[Interval(float, -1, 1)], cost=[None, ArrayLike(low=0)],
               perplexity=[None, ArrayLike(finite=False)])
def score_attack(attack: str, detection: Any, cosine: Any, *, cos_threshold: float = 0.75, cost: Any = None,
                 perplexity: Any = None) -> AttackScore:
    """An :class:`AttackScore` from a :class:`Detection` of the attacked texts and their cosines to the sources."""
    cos = np.asarray(cosine, dtype=float)
    if detection is None or len(detection.decisions) != len(cos):
        raise InputError("The 'detection' argument of score_attack must be a Detection with one decision per "
                         f"cosine ({len(cos)}). Got {type(detection).__name__} instead.")
    flagged = np.asarray(detection.decisions, dtype=bool)
    ppl = np.asarray(perplexity, dtype=float) if perplexity is not None else np.full(len(cos), np.nan)
    return AttackScore(attack, float(1 - flagged.mean()), float(cos.mean()),
                       float(np.mean(~flagged & (cos >= cos_threshold))),
                       float(np.mean(cost)) if cost is not None else float("nan"), int(len(cos)),
                       int((~np.asarray(detection.decided)).sum()),
                       float(np.nanmean(ppl)) if np.isfinite(ppl).any() else float("nan"))


@dataclass
class RobustnessReport:
    """``wm_robustness``'s answer: the watermark (name, key id), calibration, the unattacked TPR and one
    :class:`AttackScore` per attack."""

    watermark: str
    key_id: str
    fpr: float
    alpha: float
    calibration: str
    tpr_unattacked: float
    scores: list[AttackScore]

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([asdict(s) for s in self.scores])


class StageCache:
    """JSON results of expensive stages under ``cache_dir/wmattack/<stage>-<hash>.json`` (None: no caching),
    keyed by the content hash of everything the stage depends on, so that a rerun resumes."""

    def __init__(self, cache_dir: str | Path | None) -> None:
        self.root = None if cache_dir is None else Path(cache_dir) / "wmattack"
        self.hits: list[str] = []

    @validate_args(stage=[str], parts=[Satisfies(lambda v: isinstance(v, list | tuple), "a list of what the stage "
                                                 "depends on (hashed into its key)", ["parts", 3])],
                   compute=["callable"])
    def get(self, stage: str, parts: Sequence[Any], compute: Callable[[], Any]) -> Any:
        if self.root is None:
            return compute()
        from trustlab.core.files import atomic_write_text

        path = self.root / f"{stage}-{content_hash(stage, list(parts))[:20]}.json"
        if path.is_file():
            self.hits.append(stage)
            return json.loads(path.read_text())
        value = compute()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(value))
        return value


def _attacks_rule() -> Satisfies:
    return Satisfies(lambda v: isinstance(v, Mapping) and len(v) > 0 and all(
        isinstance(k, str) and isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], Attack)
        for k, a in v.items()), "a non-empty dict name -> (Attack, budget)", invalid=[None, {}, {"a": 1}])


def _example() -> dict[str, Any]:
    from trustlab.llm import load_embedder, tiny_random_llama
    from trustlab.methods.wmattack._attacks import WordDeletion
    from trustlab.methods.wmattack._keys import WatermarkKey
    from trustlab.methods.wmattack._watermarks import KGW

    m, t = tiny_random_llama()
    return {"watermark": KGW(t, WatermarkKey(3), min_tokens=2), "model": m, "tokenizer": t, "prompts": ["Hi"],
            "attacks": {"del": (WordDeletion(), 0.3)}, "oracle": QualityOracle(load_embedder())}


@validate_args(_example, watermark=[InstanceOf(Watermark)], model=[LanguageModel()], tokenizer=[Tokenizer()],
               prompts=[SequenceOf(InstanceOf(str))], attacks=[_attacks_rule()], oracle=[InstanceOf(QualityOracle)],
               null_texts=[SequenceOf(InstanceOf(str)), None], fpr=[Interval(float, 0, 1, closed="neither")],
               max_new_tokens=[Interval(int, 1, None)], cos_threshold=[Interval(float, -1, 1)],
               random_state=["random_state"])
def wm_robustness(watermark: Watermark, model: Any, tokenizer: Any, prompts: Sequence[str],
                  attacks: Mapping[str, tuple[Attack, float]], oracle: QualityOracle, *,
                  null_texts: Sequence[str] | None = None, fpr: float = 0.01, max_new_tokens: int = 96,
                  cos_threshold: float = 0.75, random_state: Any = 0) -> RobustnessReport:
    """A provider's robustness report: generate watermarked texts for ``prompts`` with ``model``, calibrate
    the threshold to ``fpr`` on ``null_texts`` (default: unwatermarked generations for the same prompts),
    then run every attack (``name -> (Attack, budget)``; the adaptive paraphraser included) and report
    evasion at that FPR vs quality. ``watermark`` keeps the calibrated threshold afterwards."""
    sampling = bool(getattr(watermark, "requires_sampling", False))
    texts = generate_watermarked(model, tokenizer, prompts, watermark, max_new_tokens=max_new_tokens,
                                 do_sample=sampling, random_state=random_state)
    if null_texts is None:
        null_texts = generate_watermarked(model, tokenizer, prompts, None, max_new_tokens=max_new_tokens)
    cal = watermark.calibrate(list(null_texts), fpr=fpr)
    base = watermark.detect(texts, on_short="abstain")
    scores = [score_attack("none", base, np.ones(len(texts)), cos_threshold=cos_threshold, cost=np.zeros(len(texts)))]
    for name, (attack, budget) in attacks.items():
        res = attack.generate(list(texts), budget)
        det = watermark.detect(list(res.outputs), on_short="abstain")
        q = oracle.score(texts, list(res.outputs))
        scores.append(score_attack(name, det, q.cosine, cos_threshold=cos_threshold, cost=res.cost,
                                   perplexity=q.perplexity))
    return RobustnessReport(watermark.name, watermark.key_id, float(fpr), cal.alpha, cal.method,
                            float(base.detection_rate), scores)
