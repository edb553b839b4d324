"""Inputs of ``trustlab audit``: tables (CSV), the target column, models from skops files, estimator specs.

Nothing here unpickles a file unless the caller passes ``trust_pickle=True``: skops files are checked for
untrusted types *before* loading (``skops.io.get_untrusted_types``) and refused unless every such type is
listed in ``trusted``; estimator specs are parsed with :mod:`ast` (a dotted class path and literal keyword
arguments; no ``eval``) and may only import from allow-listed module prefixes.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.core.arguments import AnyValue, ArrayLike, validate_args
from trustlab.core.constraints import InstanceOf, Satisfies
from trustlab.core.exceptions import InputError, UnsupportedModelError, did_you_mean

__all__ = ["read_table", "load_model", "parse_estimator", "example_table", "load_torch_classifier", "ESTIMATOR_MODULES",
           "LoadedModel", "TorchClassifier"]

#: module prefixes an estimator spec may import from
ESTIMATOR_MODULES = ("sklearn.", "xgboost.", "lightgbm.", "catboost.", "trustlab.methods.split.")
#: the two shipped example tables (``--data example:NAME``)
EXAMPLES = ("clean", "planted")
_PATH = [InstanceOf(str, Path)]
#: features for a torch classifier: a 2-d numeric table (NaN passes through to the module, as before)
_FEATURES = [ArrayLike(ndim=2, finite=False)]


def _example_path(name: str) -> Path:
    from importlib import resources

    if name not in EXAMPLES:
        raise InputError(f"The 'path' argument of read_table names an unknown example table 'example:{name}'; the "
                         f"shipped ones are {', '.join('example:' + e for e in EXAMPLES)}.{did_you_mean(name, EXAMPLES)}")
    return Path(str(resources.files("trustlab") / "data" / "_files" / "audit" / f"{name}.csv"))


@validate_args(name=[Satisfies(lambda v: v in EXAMPLES, f"one of {list(EXAMPLES)}", invalid=["dirty", 3, None],
                                valid="clean")])
def example_table(name: str) -> Path:
    """Path of a shipped example table: ``"clean"`` or ``"planted"`` (duplicates, label noise, a leaky feature;
    the planted rows are listed in the folder's ``provenance.json``; built by ``scripts/build_audit_data.py``)."""
    return _example_path(name)


@validate_args(path=_PATH)
def read_table(path: str | Path) -> Any:
    """Read a CSV table into a DataFrame (``example:clean`` / ``example:planted`` name the shipped tables).

    Raises ``InputError`` naming the file for a missing, empty or unparsable file.
    """

    text = str(path)
    p = _example_path(text.split(":", 1)[1]) if text.startswith("example:") else Path(path)
    if not p.is_file():
        raise InputError(f"The 'path' argument of read_table must be an existing CSV file. Got {text!r} (not found).")
    if p.stat().st_size == 0:
        raise InputError(f"The 'path' argument of read_table must be a CSV with a header and rows. Got {text!r} "
                         "(an empty file).")
    from trustlab.data import read_csv

    try:
        df = read_csv(p)
    except InputError as exc:  # names the file and the line
        raise InputError(f"The 'path' argument of read_table must be a readable CSV. {exc}") from None
    if len(df) == 0:
        raise InputError(f"The 'path' argument of read_table must be a CSV with at least one row. Got {text!r} "
                         f"(a header with columns {list(df.columns)[:8]} and no rows).")
    return df


def split_target(df: Any, target: str, *, name: str = "data") -> tuple[Any, np.ndarray]:
    """``(features, labels)``: the target column taken out, with "did you mean" for a missing one."""
    if target not in df.columns:
        raise InputError(f"The 'target' argument of audit must name a column of the {name} table. Got {target!r}; "
                         f"the columns are {list(map(str, df.columns))[:20]}.{did_you_mean(target, df.columns)}")
    y = df[target].to_numpy()
    if df[target].isna().any():
        raise InputError(f"The target column {target!r} of the {name} table has {int(df[target].isna().sum())} "
                         "missing value(s); drop or fill those rows first.")
    return df.drop(columns=[target]), y


@dataclass
class LoadedModel:
    """A model read from a file: the object, where it came from and what was checked before loading."""

    model: Any
    source: str
    format: str
    checked_types: list[str] = field(default_factory=list)
    trusted_types: list[str] = field(default_factory=list)


def _load_skops(path: Path, trusted: list[str]) -> LoadedModel:
    from trustlab.core.optional import require

    sio = require("skops.io", extra="audit", purpose="loading .skops models")
    try:
        untrusted = sorted(sio.get_untrusted_types(file=path))
    except Exception as exc:  # noqa: BLE001 - skops raises several types for a broken file
        raise InputError(f"The 'path' argument of load_model is not a readable skops file: {path} ({exc}).") from None
    refused = [t for t in untrusted if t not in trusted]
    if refused:
        raise UnsupportedModelError(
            f"The skops file {path} contains type(s) that are not trusted by default: {refused}. Loading runs their "
            "code, so trustlab refuses them. If you know where the file comes from, list them: "
            + " ".join(f"--trust-type {t}" for t in refused) + f" (Python: load_model(path, trusted={refused})).")
    model = sio.load(path, trusted=untrusted)
    return LoadedModel(model, str(path), "skops", untrusted, [t for t in untrusted if t in trusted])


@validate_args(path=_PATH, trusted=[InstanceOf(list, tuple)], trust_pickle=["boolean"])
def load_model(path: str | Path, *, trusted: Any = (), trust_pickle: bool = False) -> LoadedModel:
    """Load a fitted model from a ``.skops`` file (types checked first) or, only with ``trust_pickle=True``,
    from a pickle/joblib file.

    A pickle can run any code while it is read, so it is refused unless the caller says they trust the file.
    A skops file is opened without running code: its types are listed, and any type outside skops' default
    trusted set must be named in ``trusted`` (else ``UnsupportedModelError`` lists them).
    """
    p = Path(path)
    if not all(isinstance(t, str) for t in trusted):
        raise InputError(f"The 'trusted' argument of load_model must be a list of type names (str). Got {trusted!r}.")
    if not p.is_file():
        raise InputError(f"The 'path' argument of load_model must be an existing model file. Got {str(path)!r}.")
    suffix = p.suffix.lower()
    if suffix == ".skops":
        return _load_skops(p, list(trusted))
    if suffix in (".pkl", ".pickle", ".joblib"):
        if not trust_pickle:
            raise UnsupportedModelError(
                f"Refusing to unpickle {p}: reading a pickle runs whatever code it contains, and trustlab cannot check "
                "it first. Save the model with skops instead (skops.io.dump(model, 'model.skops')), or, if you made "
                "the file yourself, pass --trust-pickle (Python: trust_pickle=True).")
        import joblib

        return LoadedModel(joblib.load(p), str(p), "pickle")
    if suffix == ".safetensors":
        raise InputError(f"{p} holds torch weights only; give the module factory too (--torch-factory "
                         "package.module:function, Python: load_torch_classifier(factory, path)).")
    raise InputError(f"The 'path' argument of load_model must end in .skops (or .pkl/.joblib with trust_pickle). "
                     f"Got {str(path)!r}.")


def _literal(node: ast.AST, spec: str) -> Any:
    if isinstance(node, ast.Call):
        return _build(node, spec)
    if isinstance(node, ast.List | ast.Tuple):
        items = [_literal(e, spec) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {_literal(k, spec): _literal(v, spec) for k, v in zip(node.keys, node.values)}
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise InputError(f"The 'spec' argument of parse_estimator may only pass literals (numbers, strings, None, "
                         f"True/False, lists, tuples, dicts) or nested estimator calls. Got {ast.unparse(node)!r} in "
                         f"{spec!r}.") from None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _build(call: ast.Call, spec: str) -> Any:
    path = _dotted(call.func)
    if path is None or "." not in path:
        raise InputError(f"The 'spec' argument of parse_estimator must call a class by its full path, e.g. "
                         f"'sklearn.ensemble.RandomForestClassifier(n_estimators=200)'. Got {spec!r}.")
    if not path.startswith(ESTIMATOR_MODULES):
        raise InputError(f"The 'spec' argument of parse_estimator may only use classes from {list(ESTIMATOR_MODULES)}. "
                         f"Got {path!r}.")
    module, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise InputError(f"The 'spec' argument of parse_estimator names {path!r}, which cannot be imported.") from None
    if not isinstance(cls, type) or name.startswith("_"):
        raise InputError(f"The 'spec' argument of parse_estimator must name a public class. Got {path!r}.")
    args = [_literal(a, spec) for a in call.args]
    kwargs = {k.arg: _literal(k.value, spec) for k in call.keywords if k.arg is not None}
    if any(k.arg is None for k in call.keywords):
        raise InputError(f"The 'spec' argument of parse_estimator cannot use **kwargs. Got {spec!r}.")
    try:
        return cls(*args, **kwargs)
    except TypeError as exc:
        raise InputError(f"The 'spec' argument of parse_estimator: {path}{ast.unparse(call)[len(path):]} fails: {exc}."
                         ) from None


@validate_args(spec=[InstanceOf(str)])
def parse_estimator(spec: str) -> Any:
    """An unfitted estimator from a spec string such as ``"sklearn.ensemble.RandomForestClassifier(n_estimators=200)"``.

    Parsed with :mod:`ast`, never evaluated: the call must name a class under one of ``ESTIMATOR_MODULES`` and pass
    literal arguments or nested calls of such classes (``sklearn.pipeline.make_pipeline(...)`` is a function, so
    pipelines are written ``sklearn.pipeline.Pipeline([("s", sklearn.preprocessing.StandardScaler()), ...])``).
    """
    text = spec.strip()
    if "(" not in text:
        text += "()"
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise InputError(f"The 'spec' argument of parse_estimator must be a Python call like "
                         f"'sklearn.linear_model.LogisticRegression(C=0.5)'. Got {spec!r} (not valid syntax).") from None
    if not isinstance(tree.body, ast.Call):
        raise InputError(f"The 'spec' argument of parse_estimator must be a single class call. Got {spec!r}.")
    return _build(tree.body, spec)


_NEVER_READ = "never read: a TorchClassifier cannot be refitted, fit always raises UnsupportedModelError"


class TorchClassifier:
    """A fitted torch classifier seen as a scikit-learn classifier (``predict_proba`` = softmax of the logits).

    It cannot be refitted by trustlab, so the checks that refit the model (membership reference models,
    multiplicity, the data-randomisation control) are skipped for it.
    """

    _estimator_type = "classifier"

    def __init__(self, module: Any, n_classes: int):
        self.module = module
        self.classes_ = np.arange(n_classes)
        self.n_features_in_ = None

    @validate_args(X=_FEATURES)
    def predict_proba(self, X: Any) -> np.ndarray:
        import torch

        self.module.eval()
        with torch.no_grad():
            out = self.module(torch.as_tensor(np.asarray(X, dtype=np.float32)))
        return torch.softmax(out, -1).double().numpy()

    @validate_args(X=_FEATURES)
    def predict(self, X: Any) -> np.ndarray:
        return self.predict_proba(X).argmax(1)

    @validate_args(X=[AnyValue(_NEVER_READ)], y=[AnyValue(_NEVER_READ)])
    def fit(self, X: Any, y: Any) -> TorchClassifier:
        raise UnsupportedModelError("A TorchClassifier loaded from weights cannot be refitted by trustlab.")


def _import_factory(factory: str) -> Any:
    module, sep, name = factory.partition(":")
    if not sep or not module or not name:
        raise InputError(f"The 'factory' argument of load_torch_classifier must be 'package.module:function'. "
                         f"Got {factory!r}.")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"The 'factory' argument of load_torch_classifier: {factory!r} cannot be imported ({exc}).") \
            from None


@validate_args(factory=[InstanceOf(str), "callable"], path=_PATH)
def load_torch_classifier(factory: Any, path: str | Path) -> TorchClassifier:
    """A torch classifier: ``factory()`` builds the ``nn.Module`` (your code, named ``"package.module:function"``
    or passed as a callable), and its weights come from a ``.safetensors`` file (tensors only, no code)."""
    from trustlab.core.optional import require

    torch = require("torch", extra="torch", purpose="torch classifiers")
    st = require("safetensors.torch", extra="torch", purpose="reading .safetensors weights")
    p = Path(path)
    if not p.is_file() or p.suffix != ".safetensors":
        raise InputError(f"The 'path' argument of load_torch_classifier must be an existing .safetensors file. "
                         f"Got {str(path)!r}.")
    make = _import_factory(factory) if isinstance(factory, str) else factory
    module = make()
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"The 'factory' argument of load_torch_classifier must return a torch.nn.Module. Got "
                         f"{type(module).__name__}.")
    missing, unexpected = module.load_state_dict(st.load_file(str(p)), strict=False)
    if missing or unexpected:
        raise InputError(f"The weights in {p} do not fit the factory's module: missing {list(missing)[:5]}, "
                         f"unexpected {list(unexpected)[:5]}.")
    last = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    n_classes = last[-1].out_features if last else 2
    return TorchClassifier(module, int(n_classes))
