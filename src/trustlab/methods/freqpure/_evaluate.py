"""Defended prediction (majority vote over purifications) and ``evaluate_defence``: clean, transfer and
adaptive accuracy of a purifier + classifier in one table, so no purifier is reported against transfer
attacks only."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.optional import require
from trustlab.core.seeding import torch_generator
from trustlab.methods.freqpure._attacks import (
    _PURIFIER,
    BPDAEOT,
    PGDEOT,
    AutoAttackRand,
    SurrogatePGDEOT,
    TransferPGD,
)

torch = require("torch", purpose="trustlab.methods.freqpure")

__all__ = ["DefendedPrediction", "AttackRow", "DefenceReport", "defended_predict", "evaluate_defence",
           "default_attacks", "ATTACKS"]

#: attack names accepted by evaluate_defence (all but "transfer" are adaptive: they see the purifier)
ATTACKS: dict[str, type] = {"transfer": TransferPGD, "pgd_eot": PGDEOT, "bpda_eot": BPDAEOT,
                            "surrogate_pgd_eot": SurrogatePGDEOT, "autoattack_rand": AutoAttackRand}


@dataclass(frozen=True)
class DefendedPrediction:
    """Voted labels, the share of votes the winner got, and every run's labels ``(votes, n)``."""

    labels: np.ndarray
    vote_share: np.ndarray
    runs: np.ndarray

    def accuracy(self, y: Any) -> float:
        return float(np.mean(self.labels == np.asarray(y)))

    def run_accuracy(self, y: Any) -> float:
        """Mean accuracy of the single (unvoted) purifications."""
        return float(np.mean(self.runs == np.asarray(y)[None]))


def _images(X: Any) -> np.ndarray:
    arr = np.asarray(X, dtype=np.float32)
    return arr[:, None] if arr.ndim == 3 else arr


def _example() -> dict[str, Any]:
    from trustlab.methods.freqpure._attacks import _tiny_classifier
    from trustlab.methods.freqpure._purify import DiffPure

    return {"purifier": DiffPure(t_star=10, steps=1), "classifier": _tiny_classifier(),
            "X": np.zeros((2, 1, 16, 16)), "y": np.array([0, 1]), "budget": 0.05, "attacks": ["bpda_eot"]}


@validate_args(_example=_example, purifier=[_PURIFIER, None], classifier=[torch.nn.Module],
               X=[ArrayLike(ndim=(3, 4), low=0.0, high=1.0)], votes=[Interval(int, 1, None), None],
               random_state=["random_state"], batch_size=[Interval(int, 1, None)])
def defended_predict(purifier: Any, classifier: Any, X: Any, *, votes: int | None = None, random_state: Any = None,
                     batch_size: int = 256) -> DefendedPrediction:
    """Classify ``X`` through the defence: ``votes`` (default ``purifier.votes``) independent purifications,
    each classified, majority vote (ties broken by the summed softmax). ``purifier=None``: undefended."""
    x = _images(X)
    n_votes = 1 if purifier is None else int(votes or purifier.votes)
    gen = torch_generator(random_state)
    runs, probs = [], 0.0
    was_training = classifier.training
    classifier.eval()
    try:
        with torch.no_grad():
            for _ in range(n_votes):
                p = []
                for s in range(0, len(x), batch_size):
                    xb = torch.as_tensor(x[s:s + batch_size])
                    if purifier is not None:
                        xb = purifier.purify_tensor(xb, generator=gen).float()
                    p.append(torch.softmax(classifier(xb), dim=1).numpy())
                pr = np.concatenate(p)
                runs.append(pr.argmax(1))
                probs = probs + pr
    finally:
        classifier.train(was_training)
    runs_arr = np.stack(runs)
    k = probs.shape[1]
    counts = np.stack([(runs_arr == c).sum(0) for c in range(k)], axis=1).astype(float)
    labels = np.argmax(counts + 1e-6 * probs / n_votes, axis=1)
    return DefendedPrediction(labels, counts.max(1) / n_votes, runs_arr)


@dataclass(frozen=True)
class AttackRow:
    """One attack against the defence: accuracies of the defence and of the bare classifier on its output."""

    attack: str
    adaptive: bool
    norm: str
    budget: float
    defended_accuracy: float
    single_run_accuracy: float
    undefended_accuracy: float
    max_cost: float
    wall_time_s: float


@dataclass
class DefenceReport:
    """Clean, transfer and adaptive accuracy of one defence (voted, one-shot evaluation of each attack's
    final images). ``adaptive_accuracy`` is the minimum over the adaptive attacks (the strongest one run);
    ``worst_case_accuracy`` the minimum over every attack."""

    defence: str
    n_images: int
    votes: int
    clean_accuracy: float
    undefended_clean_accuracy: float
    rows: list[AttackRow]
    adversarial: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    protocol: str = "one-shot: each attack's final images are classified once by the voted defence"

    @property
    def transfer_accuracy(self) -> float | None:
        vals = [r.defended_accuracy for r in self.rows if not r.adaptive]
        return min(vals) if vals else None

    @property
    def adaptive_accuracy(self) -> float:
        return min(r.defended_accuracy for r in self.rows if r.adaptive)

    @property
    def worst_case_accuracy(self) -> float:
        return min([r.defended_accuracy for r in self.rows])

    def table(self) -> Any:
        """One row per evaluation (clean, then each attack) as a pandas DataFrame."""
        import pandas as pd

        rows = [{"attack": "clean", "adaptive": False, "norm": "", "budget": 0.0,
                 "defended_accuracy": self.clean_accuracy, "undefended_accuracy": self.undefended_clean_accuracy}]
        rows += [dict(vars(r)) for r in self.rows]
        return pd.DataFrame(rows).assign(defence=self.defence)


def _is_attack_spec(v: Any) -> bool:
    items = list(v)
    return bool(items) and all((isinstance(a, str) and a in ATTACKS) or isinstance(a, tuple(ATTACKS.values()))
                               for a in items)


_ATTACK_LIST = Satisfies(lambda v: isinstance(v, list | tuple) and _is_attack_spec(v),
                         f"a non-empty list of attack names {sorted(ATTACKS)} or Attack instances",
                         [[], ["fgsm"], "pgd_eot", [3]], valid=["bpda_eot"])


def _purifier_example() -> dict[str, Any]:
    from trustlab.methods.freqpure._purify import DiffPure

    return {"purifier": DiffPure(t_star=10, steps=1)}


@validate_args(_example=_purifier_example, purifier=[_PURIFIER])
def default_attacks(purifier: Any) -> list[str]:
    """The attacks :func:`evaluate_defence` runs when none are given: transfer PGD, PGD-EOT, BPDA-EOT and
    AutoAttack's rand version (torchattacks; issue 40), and
    ``surrogate_pgd_eot`` (PGD-EOT through a one-round surrogate process) for a purifier with ``t_star``,
    ``steps`` and ``rounds`` parameters (DiffPure, FreqPure), the only kind it can attack."""
    names = ["transfer", "pgd_eot", "bpda_eot", "autoattack_rand"]
    if {"t_star", "steps", "rounds"} <= set(purifier.get_params(deep=False)):
        names.append("surrogate_pgd_eot")
    return names


def _build(spec: Any, classifier: Any, purifier: Any, random_state: Any) -> tuple[str, Any, bool]:
    from sklearn.base import clone

    if isinstance(spec, str):
        atk, name = ATTACKS[spec](random_state=random_state), spec
    else:
        atk, name = clone(spec), type(spec).__name__
    params = {"classifier": classifier}
    adaptive = "purifier" in atk.get_params(deep=False)  # every attack that takes the purifier sees it
    if adaptive:
        params["purifier"] = purifier
    return name, atk.set_params(**params), adaptive


@validate_args(_example=_example, purifier=[_PURIFIER], classifier=[torch.nn.Module],
               X=[ArrayLike(ndim=(3, 4), low=0.0, high=1.0)], y=[ArrayLike(ndim=1, dtype="integer", low=0)],
               budget=[Interval(float, 0, None, closed="neither")], attacks=[_ATTACK_LIST, None],
               votes=[Interval(int, 1, None), None], random_state=["random_state"])
def evaluate_defence(purifier: Any, classifier: Any, X: Any, y: Any, *, budget: float,
                     attacks: Any = None, votes: int | None = None, random_state: Any = None) -> DefenceReport:
    """Evaluate ``purifier`` + ``classifier`` on ``(X, y)``: clean accuracy and accuracy under each attack at
    radius ``budget`` (> 0), all voted over ``votes`` purifications.

    ``attacks``: names from :data:`ATTACKS` (built with their defaults) or Attack instances (their settings
    kept); each is pointed at this classifier and purifier. At least one adaptive attack (one that sees the
    purifier) is required. ``None`` (the default): :func:`default_attacks` of the purifier, which include the
    surrogate-process attack for a diffusion purifier (the strongest in the paper's code). Returns a
    :class:`DefenceReport` (``.table()`` for one DataFrame).
    """
    specs = default_attacks(purifier) if attacks is None else list(attacks)
    x = _images(X)
    yy = np.asarray(y).astype(np.int64)
    if len(yy) != len(x):
        raise InputError(f"The 'y' argument of evaluate_defence must have one label per image ({len(x)}). "
                         f"Got {len(yy)} instead.")
    built = [_build(a, classifier, purifier, random_state) for a in specs]
    if not any(adaptive for _, _, adaptive in built):
        raise InputError("The 'attacks' argument of evaluate_defence must include an adaptive attack (pgd_eot, "
                         "bpda_eot or surrogate_pgd_eot): a purifier evaluated only against transfer attacks is not "
                         f"evaluated. Got {[n for n, _, _ in built]} instead.")
    n_votes = int(votes or purifier.votes)
    clean = defended_predict(purifier, classifier, x, votes=n_votes, random_state=random_state)
    bare = defended_predict(None, classifier, x)
    rows, adv_out = [], {}
    for name, atk, adaptive in built:
        t0 = time.perf_counter()
        res = atk.generate((x, yy), budget)
        wall = time.perf_counter() - t0
        adv = np.asarray(res.outputs, dtype=np.float32)
        d = defended_predict(purifier, classifier, adv, votes=n_votes, random_state=random_state)
        rows.append(AttackRow(name, adaptive, atk.norm, float(budget), d.accuracy(yy), d.run_accuracy(yy),
                              defended_predict(None, classifier, adv).accuracy(yy), float(np.max(res.cost)), wall))
        adv_out[name] = adv
    return DefenceReport(type(purifier).__name__, len(x), n_votes, clean.accuracy(yy), bare.accuracy(yy), rows, adv_out)
