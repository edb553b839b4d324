"""Input validation on top of scikit-learn's, raising :class:`InputError` with our messages."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.core.arguments import AnyValue, SequenceOf, validate_args
from trustlab.core.constraints import Interval, Satisfies
from trustlab.core.exceptions import InputError, NotFittedError

__all__ = ["check_array", "check_X_y", "check_consistent_length", "check_is_fitted", "check_n_features",
           "non_numeric_columns", "check_classification_targets"]


#: the rules of the options the checks share (the checked value itself is validated by the body, whose message
#: names the caller's argument)
_NAME = [Satisfies(lambda v: isinstance(v, str), "a str (the argument's name in messages)", invalid=[None, 3],
                   valid="X")]
_OWNER = [Satisfies(lambda v: isinstance(v, str), "a str (who the messages name)", invalid=[3, b"x"], valid="f"),
          None]
_NDIM = [Interval(int, 0, None), SequenceOf(Interval(int, 0, None))]
_BODY = "validated by the body, whose InputError names the caller's argument"


def _is_dtype(value: object) -> bool:
    if value is None or isinstance(value, str) and value == "numeric":
        return True
    if isinstance(value, str | type) or hasattr(value, "kind"):
        np.dtype(value)  # raises for a name that is no dtype
        return True
    return False


def _owner(owner: str | None) -> str:
    return f" of {owner}" if owner else ""


@validate_args(frame=[AnyValue("any object: only a DataFrame-like (dtypes and columns) can have non-numeric "
                                "columns; '' for every other value")])
def non_numeric_columns(frame: Any) -> str:
    """For a DataFrame-like with non-numeric columns, a description naming them with a value and an
    encoding hint; ``""`` when every column is numeric (or ``frame`` has no columns)."""
    dtypes = getattr(frame, "dtypes", None)
    if dtypes is None or not hasattr(frame, "columns") or not hasattr(dtypes, "items"):
        return ""
    bad = []
    for col, dt in dtypes.items():
        kind = getattr(dt, "kind", "O")
        if kind not in "biuf":
            try:
                example = next((v for v in frame[col] if v is not None), None)
            except Exception:  # noqa: BLE001 - an odd column: name it without an example
                example = None
            bad.append(f"{col!r} (dtype {dt}" + (f", e.g. {example!r})" if example is not None else ")"))
    if not bad:
        return ""
    return (f"non-numeric column(s) {', '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}; encode them first, e.g. "
            "with sklearn's OneHotEncoder or OrdinalEncoder in a ColumnTransformer, or pd.get_dummies")


@validate_args(X=[AnyValue(_BODY)], name=_NAME, owner=_OWNER, ndim=_NDIM + [None], allow_nan=["boolean"],
               dtype=[Satisfies(_is_dtype, '"numeric", None or a numpy dtype (np.float64, "float32", ...)',
                                invalid=["__no_dtype__", 3.5], valid="numeric")],
               min_samples=[Interval(int, 0, None)], copy=["boolean"], allow_complex=["boolean"])
def check_array(
    X: Any,
    *,
    name: str = "X",
    owner: str | None = None,
    ndim: int | tuple[int, ...] | None = 2,
    allow_nan: bool = False,
    dtype: Any = "numeric",
    min_samples: int = 1,
    copy: bool = False,
    allow_complex: bool = True,
) -> np.ndarray:
    """Return ``X`` as a numpy array or raise InputError naming the argument, rule and value.

    ``dtype="numeric"`` converts object/bool input to float64 and keeps other numeric dtypes;
    ``allow_complex=False`` refuses complex values (casting them would drop the imaginary part).
    """
    if X is None:
        raise InputError(f"The '{name}' argument{_owner(owner)} must be an array-like. Got None instead.")
    if dtype == "numeric" and (why := non_numeric_columns(X)):
        raise InputError(f"The '{name}' argument{_owner(owner)} must hold numbers. Got {why}.")
    if hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):
        X = X.to_numpy()
    try:
        arr = np.array(X, copy=copy) if copy else np.asarray(X)
    except (ValueError, TypeError) as exc:
        raise InputError(
            f"The '{name}' argument{_owner(owner)} must be a rectangular array-like. Could not convert it: {exc}"
        ) from exc
    if dtype == "numeric":
        if arr.dtype.kind in "OUSb":
            try:
                arr = arr.astype(np.float64)
            except (ValueError, TypeError) as exc:
                raise InputError(
                    f"The '{name}' argument{_owner(owner)} must hold numbers. Got dtype {arr.dtype} "
                    f"with a value that is not a number ({exc})."
                ) from exc
        elif arr.dtype.kind not in "iufc":
            raise InputError(f"The '{name}' argument{_owner(owner)} must hold numbers. Got dtype {arr.dtype}.")
    elif dtype is not None:
        arr = arr.astype(dtype, copy=False)
    if not allow_complex and arr.dtype.kind == "c":
        raise InputError(f"The '{name}' argument{_owner(owner)} must hold real numbers. Got dtype {arr.dtype} "
                         "instead; pass the real part (or the magnitude) explicitly.")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(f"{d}-d" for d in allowed)
            raise InputError(
                f"The '{name}' argument{_owner(owner)} must be a {want} array. Got an array of shape "
                f"{arr.shape} ({arr.ndim}-d) instead."
                + (" Reshape a single feature with X.reshape(-1, 1)." if arr.ndim == 1 and 2 in allowed else "")
            )
    if arr.ndim >= 1 and arr.shape[0] < min_samples:
        raise InputError(
            f"The '{name}' argument{_owner(owner)} must have at least {min_samples} sample(s). "
            f"Got shape {arr.shape} instead."
        )
    if arr.ndim >= 2 and arr.shape[0] > 0 and arr.size == 0:
        raise InputError(f"The '{name}' argument{_owner(owner)} has no features. Got shape {arr.shape} instead.")
    if not allow_nan and arr.dtype.kind in "fc" and arr.size and not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise InputError(
            f"The '{name}' argument{_owner(owner)} must be finite. Got {bad} NaN or infinite value(s) instead; "
            "impute or drop them first."
        )
    return arr


@validate_args(owner=_OWNER)
def check_consistent_length(owner: str | None = None, **arrays: Any) -> None:
    """Raise InputError when the named arrays do not have the same number of samples."""
    lengths = {k: len(v) for k, v in arrays.items() if v is not None}
    if len(set(lengths.values())) > 1:
        desc = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise InputError(f"The arguments{_owner(owner)} must have the same number of samples. Got {desc}.")


@validate_args(X=[AnyValue(_BODY)], y=[AnyValue(_BODY)], owner=_OWNER, ndim=_NDIM, y_numeric=["boolean"],
               allow_nan=["boolean"], allow_complex=["boolean"])
def check_X_y(
    X: Any, y: Any, *, owner: str | None = None, ndim: int | tuple[int, ...] = 2, y_numeric: bool = False,
    allow_nan: bool = False, allow_complex: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a feature array and a 1-d target of the same length."""
    X = check_array(X, owner=owner, ndim=ndim, allow_nan=allow_nan, allow_complex=allow_complex)
    if y is None:
        raise InputError(f"The 'y' argument{_owner(owner)} is required. Got None instead.")
    y = check_array(y, name="y", owner=owner, ndim=(1, 2), dtype="numeric" if y_numeric else None)
    if y.ndim == 2:
        if y.shape[1] != 1:
            raise InputError(
                f"The 'y' argument{_owner(owner)} must be 1-d. Got shape {y.shape} instead."
            )
        y = y.ravel()
    if y.dtype.kind in "fc" and not np.isfinite(y).all():
        raise InputError(f"The 'y' argument{_owner(owner)} must be finite. Got NaN or infinite labels.")
    if y.dtype.kind == "O" and any(v is None for v in y):
        raise InputError(f"The 'y' argument{_owner(owner)} must not contain None.")
    check_consistent_length(owner, X=X, y=y)
    return X, y


@validate_args(y=[AnyValue(_BODY)], name=_NAME, owner=_OWNER)
def check_classification_targets(y: Any, *, name: str = "y", owner: str | None = None) -> None:
    """Refuse a target that is not a set of class labels (scikit-learn's ``type_of_target``).

    Floats with non-integer values ("continuous") would otherwise become one class per distinct value;
    the error says how many distinct values there were and how to proceed.
    """
    from sklearn.utils.multiclass import type_of_target

    arr = np.asarray(y)
    try:
        kind = type_of_target(arr, input_name=name)
    except ValueError as exc:
        raise InputError(f"The '{name}' argument{_owner(owner)} must hold class labels. {exc}") from exc
    if kind.startswith("continuous"):
        n = len(np.unique(arr))
        raise InputError(
            f"The '{name}' argument{_owner(owner)} must hold class labels. Got continuous values instead "
            f"({n} distinct floats, e.g. {arr.ravel()[0].item()!r}): each would become its own class. Bin them first "
            "(e.g. np.digitize) or pass integer or string labels."
        )


@validate_args(obj=[AnyValue("any object: its fitted (trailing-underscore) attributes are looked up")],
               attributes=[Satisfies(lambda v: isinstance(v, str), "a str", invalid=[3], valid="coef_"),
                           SequenceOf(Satisfies(lambda v: isinstance(v, str), "a str", invalid=[3]), min_len=0), None])
def check_is_fitted(obj: Any, attributes: str | list[str] | None = None) -> None:
    """Raise NotFittedError unless ``obj`` has the given (or any trailing-underscore) fitted attributes."""
    owner = type(obj).__name__
    if attributes is None:
        fitted = [k for k in vars(obj) if k.endswith("_") and not k.startswith("__")]
    else:
        attrs = [attributes] if isinstance(attributes, str) else list(attributes)
        fitted = [a for a in attrs if hasattr(obj, a)]
        if len(fitted) != len(attrs):
            fitted = []
    if not fitted:
        raise NotFittedError(
            f"This {owner} instance is not fitted yet. Call 'fit' with appropriate arguments before using it."
        )


@validate_args(obj=[AnyValue("any object: its n_features_in_ is read when it has one")],
               X=[Satisfies(lambda v: hasattr(v, "ndim") and hasattr(v, "shape"), "an array (numpy or torch, with "
                            "ndim and shape)", invalid=[None, [[1.0]]], valid=np.zeros((2, 2)))])
def check_n_features(obj: Any, X: np.ndarray) -> None:
    """Raise InputError when X's feature count differs from the one seen in ``fit``."""
    expected = getattr(obj, "n_features_in_", None)
    if expected is not None and X.ndim >= 2 and X.shape[1] != expected:
        raise InputError(
            f"The 'X' argument of {type(obj).__name__} must have {expected} features, as seen in fit. "
            f"Got {X.shape[1]} instead."
        )
