"""The :class:`Explanation` record, its :class:`Controls` bundle and its :class:`ProvenanceCard`.

An explanation carries its sanity status into every output: ``repr``, ``to_markdown``, ``to_dict``/``to_json``,
``plot`` (title) and ``to_shap`` (a warning, and ``trustlab_status`` on the shap object). A failed or
unchecked explanation is never shown without its label.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trustlab.core.arguments import ArrayLike, validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.hashing import content_hash

__all__ = ["Explanation", "Controls", "ProvenanceCard", "package_versions", "CONTROL_NAMES", "EXPLANATION_RULE"]

#: the controls :func:`~trustlab.explain.attach_controls` builds, in report order
CONTROL_NAMES = ("model_randomisation", "data_randomisation", "placebo_permuted", "placebo_random",
                 "baseline_linear", "baseline_global")


def package_versions(torch: bool = False) -> dict[str, str]:
    """Installed versions of the packages an explanation depends on (no imports, metadata only)."""
    from importlib.metadata import PackageNotFoundError, version

    names = ["numpy", "scipy", "scikit-learn", "shap", "trustlab"] + (["torch", "captum"] if torch else [])
    out = {"python": sys.version.split()[0]}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = "not installed"
    return out


@dataclass(frozen=True)
class ProvenanceCard:
    """How an explanation was made: versions, seeds, hashes of data, model and background, explainer config."""

    versions: dict[str, str]
    seeds: dict[str, int]
    data_hash: str
    model_hash: str
    model_type: str
    background_hash: str
    explainer: dict[str, Any]
    train_data_hash: str | None = None
    feature_names_hash: str = ""

    @property
    def card_hash(self) -> str:
        """SHA-256 of the whole card (one identifier for the exact explanation setting)."""
        return content_hash(asdict(self))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "card_hash": self.card_hash}

    def to_markdown(self) -> str:
        d = self.to_dict()
        lines = ["| field | value |", "|---|---|"]
        for k in ("model_type", "model_hash", "data_hash", "background_hash", "train_data_hash", "card_hash"):
            lines.append(f"| {k} | `{d[k]}` |")
        lines.append(f"| seeds | {json.dumps(self.seeds, sort_keys=True)} |")
        lines.append(f"| explainer | `{json.dumps(self.explainer, sort_keys=True, default=str)}` |")
        lines.append(f"| versions | {', '.join(f'{k} {v}' for k, v in self.versions.items())} |")
        return "\n".join(lines)


@dataclass
class Explanation:
    """Attributions of one output per row, shap-compatible, with its controls, verdict and provenance.

    ``values`` ``(n, p)``, ``base_values`` ``(n,)``, ``data`` ``(n, p)``, ``feature_names`` (p names),
    ``target`` the explained output index of each row, ``output_value`` the model's value of that output,
    ``role`` ``"real"`` or the control's name. ``status``: the verdict's PASS / FAIL / INCOMPLETE,
    ``UNCHECKED`` when no controls were run, ``CONTROL`` for a control explanation.
    """

    values: np.ndarray
    base_values: np.ndarray
    data: np.ndarray
    feature_names: list[str]
    target: np.ndarray
    output_value: np.ndarray
    output: str = "raw"
    method: str = "custom"
    backend: str = ""
    role: str = "real"
    output_names: list[str] | None = None
    provenance: ProvenanceCard | None = None
    controls: Controls | None = None
    verdict: Any = None
    selected: list[int] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.values.shape)  # type: ignore[return-value]

    @property
    def status(self) -> str:
        if self.role != "real":
            return "CONTROL"
        return "UNCHECKED" if self.verdict is None else self.verdict.status

    def label(self) -> str:
        """The status line every output carries, e.g. ``FAILED sanity checks: model_randomisation FAIL (...)``."""
        if self.role != "real":
            return f"CONTROL ({self.role}): not an explanation of the model"
        if self.verdict is None:
            return "UNCHECKED: no sanity checks were run (explain(..., controls=True))"
        if self.verdict.status == "PASS":
            return "PASS: " + ", ".join(c.name for c in self.verdict.checks)
        prefix = "FAILED sanity checks" if self.verdict.status == "FAIL" else "INCOMPLETE sanity checks"
        return prefix + ": " + self.verdict.summary().split(": ", 1)[-1]

    def __repr__(self) -> str:
        n, p = self.shape
        return (f"Explanation(method={self.method!r}, backend={self.backend!r}, n={n}, p={p}, role={self.role!r}, "
                f"status={self.status}) [{self.label()}]")

    @validate_args(rows=[ArrayLike(ndim=(0, 1), dtype="integer")])
    def select(self, rows: Any) -> Explanation:
        """The explanation of a subset of its rows, with its controls sliced alike and the same verdict and card.

        The verdict (and provenance card) stay those of all the explained rows: check on many rows, show a few
        (e.g. in a study). ``selected`` records which rows were kept.
        """
        from trustlab.core.exceptions import InputError

        idx = np.arange(self.shape[0])[np.asarray(rows, dtype=int)]
        if idx.size == 0:
            raise InputError(f"The 'rows' argument of Explanation.select must pick at least one of the {self.shape[0]} "
                             f"rows. Got {rows!r} instead.")
        picked = dataclasses.replace(
            self, values=self.values[idx], base_values=self.base_values[idx], data=self.data[idx],
            target=self.target[idx], output_value=self.output_value[idx],
            selected=[int(i) if self.selected is None else self.selected[int(i)] for i in idx], controls=None)
        if self.controls is not None:
            picked.controls = Controls({k: v.select(idx) for k, v in self.controls.items()},
                                       dict(self.controls.unavailable),
                                       [(s, e.select(idx)) for s, e in self.controls.cascade])
        return picked

    @validate_args(i=[Interval(int, None, None)])
    def class_name(self, i: int) -> str:
        t = int(self.target[i])
        return self.output_names[t] if self.output_names and t < len(self.output_names) else str(t)

    def to_shap(self) -> Any:
        """A ``shap.Explanation`` of the same values; warns unless the explanation passed its sanity checks."""
        import shap

        if self.status not in ("PASS", "CONTROL"):
            warnings.warn(f"explanation {self.label()}", UserWarning, stacklevel=2)
        out = shap.Explanation(values=np.array(self.values), base_values=np.array(self.base_values),
                               data=np.array(self.data), feature_names=list(self.feature_names))
        out.trustlab_status = self.status  # type: ignore[attr-defined]
        out.trustlab_label = self.label()  # type: ignore[attr-defined]
        return out

    @validate_args(values=["boolean"])
    def to_dict(self, values: bool = True) -> dict[str, Any]:
        """Plain data (JSON-ready): status and label first, then values, verdict, controls and provenance."""
        out: dict[str, Any] = {"status": self.status, "label": self.label(), "role": self.role, "method": self.method,
                               "backend": self.backend, "output": self.output, "feature_names": list(self.feature_names),
                               "shape": list(self.shape), "selected_rows": self.selected}
        if values:
            out.update(values=self.values.tolist(), base_values=self.base_values.tolist(), data=self.data.tolist(),
                       target=self.target.tolist(), output_value=self.output_value.tolist())
        out["verdict"] = None if self.verdict is None else self.verdict.to_dict()
        out["controls"] = None if self.controls is None else {
            "available": list(self.controls), "unavailable": dict(self.controls.unavailable),
            "cascade": [s for s, _ in self.controls.cascade]}
        out["provenance"] = None if self.provenance is None else self.provenance.to_dict()
        return out

    @validate_args(values=["boolean"], indent=[Interval(int, 0, None), None])
    def to_json(self, values: bool = True, indent: int | None = 1) -> str:
        from trustlab.results.result import to_jsonable

        return json.dumps(to_jsonable(self.to_dict(values)), indent=indent, sort_keys=False)

    @validate_args(top_k=[Interval(int, 0, None)], max_rows=[Interval(int, 0, None)])
    def to_markdown(self, top_k: int = 5, max_rows: int = 3) -> str:
        """A Markdown summary: the status line, the sanity checks, correlations, top features of a few rows."""
        n, p = self.shape
        lines = [f"### Explanation ({self.method} / {self.backend}): **{self.status}**", "", f"> {self.label()}", ""]
        if self.verdict is not None:
            lines += ["| check | status | observed | threshold |", "|---|---|---|---|"]
            for c in self.verdict.checks:
                obs = "" if c.observed is None else f"{c.observed:.3f}"
                lines.append(f"| {c.name} | {c.status} | {obs} | {c.threshold} |")
            lines += ["", "| control | Spearman abs | Spearman signed | rows defined |", "|---|---|---|---|"]
            for name, r in self.verdict.correlations.items():
                lines.append(f"| {name} | {r.absolute:.3f} | {r.signed:.3f} | {r.n_rows_defined}/{r.n_rows} |")
            lines.append("")
        k = min(top_k, p)
        for i in range(min(max_rows, n)):
            top = np.argsort(-np.abs(self.values[i]))[:k]
            feats = ", ".join(f"{self.feature_names[j]} {self.values[i, j]:+.3g}" for j in top)
            lines.append(f"- row {i} (output {self.class_name(i)} = {self.output_value[i]:.3g}): {feats}")
        if self.provenance is not None:
            lines += ["", self.provenance.to_markdown()]
        return "\n".join(lines) + "\n"

    @validate_args(row=[Interval(int, None, None), None], top_k=[Interval(int, 0, None)])
    def plot(self, row: int | None = None, top_k: int = 10) -> Any:
        """A bar chart of one row's (or the mean absolute) attributions; the title carries the status."""
        from matplotlib.figure import Figure

        vals = np.abs(self.values).mean(axis=0) if row is None else self.values[row]
        k = min(top_k, len(vals))
        top = np.argsort(-np.abs(vals))[:k][::-1]
        fig = Figure(figsize=(5.5, 0.8 + 0.3 * k), dpi=110, layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
        ax.barh([self.feature_names[j] for j in top], vals[top],
                color="tab:red" if self.status in ("FAIL", "INCOMPLETE", "UNCHECKED") else "tab:blue")
        ax.set_xlabel("mean |attribution|" if row is None else f"attribution (row {row})")
        ax.set_title(f"{self.method} [{self.status}]", fontsize=9)
        return fig


@dataclass
class Controls(Mapping):
    """The control explanations of one real explanation, by name (each an :class:`Explanation` of the same
    shape, rows and feature names); ``unavailable`` says why a control could not be made; ``cascade`` holds
    every stage of the cascading model randomisation (the last one is ``self["model_randomisation"]``)."""

    explanations: dict[str, Explanation]
    unavailable: dict[str, str] = field(default_factory=dict)
    cascade: list[tuple[str, Explanation]] = field(default_factory=list)

    def __getitem__(self, name: str) -> Explanation:
        if name not in self.explanations:
            from trustlab.core.exceptions import UnknownNameError, did_you_mean

            why = self.unavailable.get(name)
            raise UnknownNameError(f"No control named {name!r}" + (f": it was not made ({why})." if why else
                                   f".{did_you_mean(name, list(self.explanations))} Available: {sorted(self.explanations)}."))
        return self.explanations[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.explanations)

    def __len__(self) -> int:
        return len(self.explanations)



#: the argument rule of every public function that takes an Explanation
EXPLANATION_RULE = Satisfies(lambda v: isinstance(v, Explanation), "an Explanation", ["not-an-explanation", 3.5])
