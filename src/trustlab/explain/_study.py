"""Blinded, pre-registered user-study exports of explanations and their controls.

``export_study`` writes, atomically, into the user's folder only::

    out_dir/
      stimuli/S-<id>.json     one file per (case, condition); no condition label anywhere
      assignment.csv          participant, position, stimulus (randomised condition assignment)
      preregistration.md      hypotheses, outcomes, power analysis, analysis plan, limitations checklist
      key.sha256              the SHA-256 of the sealed key (publish it with the pre-registration)
      sealed/key.json         stimulus -> (explanation, row, condition): keep it from whoever runs the sessions
      manifest.json           SHA-256 of every file
      README.txt              what to share with whom

Every byte is a function of the explanations and the seed drawn from ``random_state`` (no timestamps, sorted
JSON, fixed rounding), so two exports with the same inputs are byte-identical. Stimulus and case ids are random
draws, so neither names nor listing order carry the condition; within a case, stimuli differ only in their id and attribution numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, SequenceOf, validate_args
from trustlab.core.constraints import Boolean, Interval, Options, Satisfies
from trustlab.core.exceptions import InputError
from trustlab.core.seeding import as_seed, seed_alias
from trustlab.explain._explanation import EXPLANATION_RULE, Explanation
from trustlab.explain._power import PROBABILITY, PowerResult, sample_size
from trustlab.explain._prereg import preregistration

__all__ = ["CONDITIONS", "StudyExport", "StudyKey", "KeyEntry", "BlindingReport", "export_study", "open_key",
           "check_blinding", "condition_values"]

#: study condition -> the control shown (None: the real explanation)
CONDITIONS: dict[str, str | None] = {
    "real": None, "placebo": "placebo_permuted", "placebo_random": "placebo_random", "baseline": "baseline_linear",
    "baseline_global": "baseline_global", "model_randomisation": "model_randomisation",
    "data_randomisation": "data_randomisation",
}
#: words that must not occur in anything a participant sees, besides the user's own feature and class names
LEAK_WORDS = tuple(sorted(set(CONDITIONS) | {c for c in CONDITIONS.values() if c} |
                          {"placebo", "random", "baseline", "control", "real", "condition", "sham", "permut", "shuffl"}))


def _example() -> dict[str, Any]:
    from trustlab.explain._controls import explanation_from_values

    return {"explanations": [explanation_from_values(np.eye(2), np.eye(2))],
            "explanation": explanation_from_values(np.eye(2), np.eye(2)), "conditions": ["real", "placebo"],
            "out_dir": "unused-out-dir"}


#: a folder the user names (never a default)
_FOLDER = Satisfies(lambda p: isinstance(p, str | os.PathLike) and str(p) != "", "a folder path", [None, 3, ""])


@validate_args(_example=_example, explanation=[EXPLANATION_RULE], condition=[Options(list(CONDITIONS))])
def condition_values(explanation: Explanation, condition: str) -> np.ndarray:
    """The ``(n, p)`` attributions a condition shows for ``explanation`` (``"real"``: its own values)."""
    if CONDITIONS[condition] is not None and (explanation.controls is None or
                                              CONDITIONS[condition] not in explanation.controls):
        raise InputError(f"The 'condition' argument of condition_values asks for {condition!r}, but the explanation "
                         f"has no {CONDITIONS[condition]!r} control. Got {condition!r} instead.")
    ctrl = CONDITIONS[condition]
    if ctrl is None:
        return explanation.values
    return explanation.controls[ctrl].values  # type: ignore[index]


def _num(v: float, decimals: int) -> float:
    r = round(float(v), decimals)
    return 0.0 if r == 0 else r


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n").encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ids(rng: np.random.Generator, n: int, prefix: str, width: int) -> list[str]:
    seen: set[str] = set()
    out = []
    while len(out) < n:
        s = f"{prefix}-" + "".join(f"{b:02x}" for b in rng.integers(0, 256, size=width // 2))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


@dataclass(frozen=True)
class StudyExport:
    """What :func:`export_study` wrote: the folder, counts, the sealed key's hash and every file's hash."""

    out_dir: Path
    conditions: tuple[str, ...]
    design: str
    n_cases: int
    n_stimuli: int
    n_participants: int
    key_sha256: str
    files: dict[str, str]
    power: PowerResult


@dataclass(frozen=True)
class KeyEntry:
    stimulus: str
    case: str
    explanation: int
    row: int
    condition: str
    scale: float = 1.0


@dataclass(frozen=True)
class StudyKey:
    """The opened, hash-verified key of an exported study."""

    entries: dict[str, KeyEntry]
    conditions: tuple[str, ...]
    seed: int
    sha256: str

    def lookup(self, stimulus: str) -> KeyEntry:
        if stimulus not in self.entries:
            raise InputError(f"The 'stimulus' argument of StudyKey.lookup must be a stimulus id of this study. "
                             f"Got {stimulus!r} instead.")
        return self.entries[stimulus]


@dataclass(frozen=True)
class BlindingReport:
    """The leak scan of an export's participant-facing files; ``passed`` when no problem was found."""

    n_files: int
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems


def _scaled(values: np.ndarray, real: np.ndarray, match_scale: bool) -> tuple[np.ndarray, float]:
    """``values`` rescaled to the real row's total |attribution| when ``match_scale`` (and both are non-zero)."""
    a, b = float(np.abs(values).sum()), float(np.abs(real).sum())
    factor = b / a if match_scale and a > 0 and b > 0 else 1.0
    return values * factor, factor


def _stimulus(e: Explanation, i: int, values: np.ndarray, sid: str, cid: str, decimals: int) -> dict[str, Any]:
    kind = {"proba": "probability"}.get(e.output, "score")
    return {"stimulus": sid, "case": cid,
            "output": {"label": e.class_name(i), "kind": kind, "value": _num(e.output_value[i], decimals)},
            "base_value": _num(e.base_values[i], decimals),
            "features": [{"name": n, "value": _num(e.data[i, j], decimals), "attribution": _num(values[j], decimals)}
                         for j, n in enumerate(e.feature_names)]}


def _assignment(rng: np.random.Generator, design: str, cases: list[str], conditions: tuple[str, ...],
                sid_of: dict[tuple[str, str], str], n_participants: int) -> bytes:
    k = len(conditions)
    blocks = np.concatenate([rng.permutation(k) for _ in range(-(-n_participants // k))])[:n_participants]
    lines = ["participant,position,stimulus"]
    for j, r in enumerate(blocks):
        order = rng.permutation(len(cases))
        for pos, ci in enumerate(order):
            cond = conditions[int(r)] if design == "between" else conditions[(int(ci) + int(r)) % k]
            lines.append(f"P{j + 1:04d},{pos + 1},{sid_of[(cases[int(ci)], cond)]}")
    return ("\n".join(lines) + "\n").encode()


def _check_explanations(explanations: list[Explanation], conditions: tuple[str, ...], allow_unverified: bool) -> None:
    for k, e in enumerate(explanations):
        if e.role != "real":
            raise InputError(f"The 'explanations' argument of export_study must hold real explanations; item {k} is "
                             f"the control {e.role!r}.")
        if e.feature_names != explanations[0].feature_names:
            raise InputError(f"The 'explanations' argument of export_study must share feature names; item {k} has "
                             f"{e.feature_names[:4]}... instead of {explanations[0].feature_names[:4]}....")
        if e.status != "PASS" and not allow_unverified:
            raise InputError(f"The 'explanations' argument of export_study holds item {k} with status {e.status} "
                             f"({e.label()}). A study of an explanation that did not pass its sanity checks measures "
                             "a broken explanation; pass allow_unverified=True to export it anyway (its status is "
                             "recorded in the key and the pre-registration).")
        for c in conditions:
            ctrl = CONDITIONS[c]
            if ctrl is not None and (e.controls is None or ctrl not in e.controls):
                why = "it has no controls (explain(..., controls=True))" if e.controls is None else \
                    e.controls.unavailable.get(ctrl, "not made")
                raise InputError(f"The 'conditions' argument of export_study asks for {c!r}, but explanation {k} has "
                                 f"no {ctrl!r} control: {why}.")


def _write_tree(out_dir: Path, files: dict[str, bytes], overwrite: bool) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not overwrite)):
        raise InputError(f"The 'out_dir' argument of export_study must be a new or empty folder (pass overwrite=True "
                         f"to replace an earlier export). Got {str(out_dir)!r}, which is not empty, instead.")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    old = None
    try:
        for rel, data in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{tmp.name.rsplit('.', 1)[-1]}")
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out_dir.exists():
            os.replace(old, out_dir)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _explanation_list(explanations: Any) -> list[Explanation]:
    return [explanations] if isinstance(explanations, Explanation) else list(explanations)


def _is_explanations(v: Any) -> bool:
    items = _explanation_list(v) if isinstance(v, Explanation | list | tuple) else None
    return bool(items) and all(isinstance(e, Explanation) for e in items)


@seed_alias
@validate_args(_example=_example,
               explanations=[Satisfies(_is_explanations, "an Explanation or a non-empty list of Explanations",
                                       ["not-an-explanation", [], [1, 2]])],
               conditions=[SequenceOf(Options(list(CONDITIONS)), min_len=2, unique=True)],
               random_state=["random_state"], out_dir=[_FOLDER],
               design=[Options(["between", "within"])], n_participants=[None, Interval(int, 1, None)],
               y_true=[None, SequenceOf(ArrayLike(ndim=1, dtype="any"))], effect_size=[Interval(float, 0, None,
                                                                                              closed="neither")],
               alpha=[PROBABILITY], power=[PROBABILITY], decimals=[Interval(int, 1, 12)], match_scale=[Boolean()],
               allow_unverified=[Boolean()],
               overwrite=[Boolean()], title=[str])
def export_study(explanations: Any, conditions: Any = ("real", "placebo", "baseline"), *, random_state: Any,
                 out_dir: Any,
                 design: str = "between", n_participants: int | None = None, y_true: Any = None,
                 effect_size: float = 0.5, alpha: float = 0.05, power: float = 0.8, decimals: int = 4,
                 match_scale: bool = False, allow_unverified: bool = False, overwrite: bool = False,
                 title: str = "Explanation user study") -> StudyExport:
    """Write a blinded, pre-registered stimulus set of ``explanations`` under ``conditions`` to ``out_dir``.

    Each row of each explanation is a *case*; each case gets one stimulus per condition (``"real"``, ``"placebo"``
    = the permuted placebo, ``"placebo_random"``, ``"baseline"`` = the linear baseline, ``"baseline_global"``,
    ``"model_randomisation"``, ``"data_randomisation"``). The first condition is the reference of the
    hypotheses. ``design="between"``: each participant sees every case in one condition (permuted blocks);
    ``"within"``: every case once, conditions rotated across cases. ``n_participants`` defaults to the power
    analysis (``effect_size``, ``alpha`` Bonferroni-corrected over the comparisons, ``power``) times the number of
    conditions. ``y_true`` (one label array per explanation) records in the key whether the model was right on
    each case, for the appropriate-reliance outcomes. ``match_scale=True`` rescales every shown attribution vector
    to the real one's total |attribution| in that case (the factor is in the key), so conditions do not differ in
    scale. Explanations that did not PASS their sanity checks are refused unless ``allow_unverified=True``.

    Examples
    --------
    >>> export_study([exp], random_state=7, out_dir="study/")  # doctest: +SKIP

    ``random_state`` (an int, a numpy Generator or None; ``seed=`` is its deprecated name) gives the seed that
    draws the ids and the assignment; the key, manifest and pre-registration record that int seed (a Generator
    is advanced once to draw it), so the export is reproducible from what it records.
    """
    seed = as_seed(random_state)
    exps = _explanation_list(explanations)
    conds = tuple(conditions)
    _check_explanations(exps, conds, allow_unverified)
    if y_true is not None and (len(y_true) != len(exps) or any(len(y) != e.shape[0] for y, e in zip(y_true, exps))):
        raise InputError("The 'y_true' argument of export_study must hold one label array per explanation, one label "
                         f"per row. Got {len(y_true)} array(s) for {len(exps)} explanation(s) instead.")
    pw = sample_size(effect_size, alpha=alpha, power=power, n_comparisons=max(1, len(conds) - 1))
    n_part = n_participants if n_participants is not None else pw.n_per_group * len(conds)
    rng = np.random.default_rng(seed)
    pairs = [(k, i) for k, e in enumerate(exps) for i in range(e.shape[0])]
    cases = _ids(rng, len(pairs), "C", 8)
    sids = _ids(rng, len(pairs) * len(conds), "S", 12)
    files: dict[str, bytes] = {}
    key: dict[str, Any] = {}
    sid_of: dict[tuple[str, str], str] = {}
    for (k, i), cid in zip(pairs, cases):
        for c in conds:
            sid = sids[len(sid_of)]
            sid_of[(cid, c)] = sid
            shown, factor = _scaled(condition_values(exps[k], c)[i], exps[k].values[i], match_scale)
            files[f"stimuli/{sid}.json"] = _dumps(_stimulus(exps[k], i, shown, sid, cid, decimals))
            correct = None if y_true is None else bool(str(np.asarray(y_true[k])[i]) == exps[k].class_name(i))
            source = i if exps[k].selected is None else exps[k].selected[i]
            key[sid] = {"case": cid, "explanation": k, "row": i, "source_row": source, "condition": c,
                        "scale": factor, "model_correct": correct}
    files["assignment.csv"] = _assignment(rng, design, cases, conds, sid_of, n_part)
    key_bytes = _dumps({"seed": seed, "conditions": list(conds), "design": design, "match_scale": match_scale,
                        "stimuli": key,
                        "explanations": [{"status": e.status, "label": e.label(), "card_hash":
                                          None if e.provenance is None else e.provenance.card_hash} for e in exps]})
    key_hash = _sha(key_bytes)
    files["sealed/key.json"] = key_bytes
    files["key.sha256"] = f"{key_hash}  sealed/key.json\n".encode()
    files["preregistration.md"] = preregistration(title=title, exps=exps, conditions=conds, design=design,
                                                  n_cases=len(pairs), n_participants=n_part, power=pw, seed=seed,
                                                  key_hash=key_hash, y_true=y_true, match_scale=match_scale).encode()
    files["README.txt"] = _readme(len(pairs), len(sid_of)).encode()
    manifest = {"files": {rel: _sha(data) for rel, data in sorted(files.items())}, "seed": seed,
                "n_stimuli": len(sid_of), "n_cases": len(pairs)}
    files["manifest.json"] = _dumps(manifest)
    out = Path(out_dir)
    _write_tree(out, files, overwrite)
    return StudyExport(out_dir=out, conditions=conds, design=design, n_cases=len(pairs), n_stimuli=len(sid_of),
                       n_participants=n_part, key_sha256=key_hash, files=manifest["files"], power=pw)


def _readme(n_cases: int, n_stimuli: int) -> str:
    return (f"Blinded explanation study: {n_cases} cases, {n_stimuli} stimuli.\n\n"
            "Give to the study platform / the person running sessions: stimuli/ and assignment.csv only.\n"
            "Publish with the pre-registration: preregistration.md and key.sha256 (a commitment to the key).\n"
            "Keep sealed until data collection ends: sealed/key.json (maps each stimulus to its condition).\n"
            "Check the key after unsealing: trustlab.explain.open_key(folder) verifies it against key.sha256.\n")


@validate_args(out_dir=[_FOLDER])
def open_key(out_dir: Any) -> StudyKey:
    """Open the sealed key of an export, verified against ``key.sha256`` (refused if it was changed)."""
    root = Path(out_dir)
    try:
        data = (root / "sealed" / "key.json").read_bytes()
        committed = (root / "key.sha256").read_text().split()[0]
    except OSError as exc:
        raise InputError(f"The 'out_dir' argument of open_key must be a folder written by export_study. Got "
                         f"{str(root)!r} instead ({exc}).") from exc
    if _sha(data) != committed:
        raise InputError(f"The 'out_dir' argument of open_key holds a key whose SHA-256 does not match key.sha256 "
                         f"(the key was changed after sealing). Got {str(root)!r} instead.")
    raw = json.loads(data)
    entries = {sid: KeyEntry(sid, d["case"], int(d["explanation"]), int(d["row"]), d["condition"], float(d["scale"]))
               for sid, d in raw["stimuli"].items()}
    return StudyKey(entries=entries, conditions=tuple(raw["conditions"]), seed=int(raw["seed"]), sha256=committed)


def _skeleton(stim: dict[str, Any]) -> str:
    s = json.loads(json.dumps(stim))
    s.pop("stimulus", None)
    for f in s.get("features", []):
        f["attribution"] = 0
    return json.dumps(s, sort_keys=True)


def _leaks(text: str) -> list[str]:
    low = text.lower()
    return [w for w in LEAK_WORDS if w in low]


@validate_args(out_dir=[_FOLDER])
def check_blinding(out_dir: Any) -> BlindingReport:
    """Scan what participants see (``stimuli/``, ``assignment.csv``) for anything that names or encodes a condition.

    Problems: a leak word (a condition or control name, "placebo", "random", ...) in a file name, a JSON key, an
    id or a fixed field (the user's feature and class names are exempt, being the same in every condition); a
    stimulus whose structure differs from the others; two stimuli of one case that differ in anything but their
    id and attribution numbers; a file in ``stimuli/`` that is not a stimulus; extra columns in assignment.csv.
    """
    root = Path(out_dir)
    problems: list[str] = []
    stims = sorted((root / "stimuli").glob("*")) if (root / "stimuli").is_dir() else []
    if not stims:
        problems.append("no stimuli/ folder with stimulus files")
    skeleton_of_case: dict[str, str] = {}
    keysets = set()
    for path in stims:
        problems += [f"{path.name}: file name contains {w!r}" for w in _leaks(path.name)]
        try:
            stim = json.loads(path.read_text())
        except (OSError, ValueError):
            problems.append(f"{path.name}: not a JSON stimulus")
            continue
        keysets.add((tuple(sorted(stim)), tuple(sorted(stim.get("output", {}))),
                     tuple(sorted({k for f in stim.get("features", []) for k in f}))))
        fixed = " ".join([str(stim.get("stimulus")), str(stim.get("case")), str(stim.get("output", {}).get("kind"))])
        problems += [f"{path.name}: field value contains {w!r}" for w in _leaks(fixed)]
        sk = _skeleton(stim)
        prev = skeleton_of_case.setdefault(str(stim.get("case")), sk)
        if prev != sk:
            problems.append(f"{path.name}: differs from another stimulus of case {stim.get('case')} in more than "
                            "its id and attributions")
    if len(keysets) > 1:
        problems.append(f"stimuli have {len(keysets)} different structures")
    for ks in keysets:
        problems += [f"JSON key contains {w!r}" for k in sum(ks, ()) for w in _leaks(k)]
    assign = root / "assignment.csv"
    if assign.is_file():
        header = assign.read_text().splitlines()[0]
        if header != "participant,position,stimulus":
            problems.append(f"assignment.csv has columns {header!r}")
    return BlindingReport(n_files=len(stims), problems=problems)
