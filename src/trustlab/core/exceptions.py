"""The trustlab exception tree (DESIGN section 5).

Every error derives from :class:`TrustlabError` *and* from the builtin a user would catch
without knowing trustlab, so ``except ValueError`` keeps working. Messages follow one template:
owner, rule, value received, fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from trustlab.core._declare import takes_any

#: the public error and warning classes, in one place: ``trustlab``, ``trustlab.exceptions`` and
#: ``trustlab.core`` export exactly these names from this module
ERROR_NAMES = (
    "TrustlabError",
    "ConfigError",
    "InputError",
    "NotFittedError",
    "UnsupportedModelError",
    "MissingDependencyError",
    "AssetNotFoundError",
    "UnknownNameError",
    "BudgetExceededError",
    "ScaleWarning",
    "ConvergenceWarning",
)

__all__ = [*ERROR_NAMES, "ERROR_NAMES", "did_you_mean"]


class TrustlabError(Exception):
    """Root of every error raised by trustlab."""


class ConfigError(TrustlabError, ValueError, TypeError):
    """A hyper-parameter or configuration value breaks its rule."""


class InputError(TrustlabError, ValueError):
    """Data passed to a verb is unusable (empty, NaN/inf, wrong shape, mismatched lengths...)."""


class NotFittedError(TrustlabError, ValueError, AttributeError):
    """A verb that needs a fitted object was called before ``fit``."""


class UnsupportedModelError(TrustlabError, TypeError):
    """The model's architecture or type is not supported by this operation."""


class MissingDependencyError(TrustlabError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class AssetNotFoundError(TrustlabError, FileNotFoundError):
    """A model or data file is missing; the message names the package that ships it."""


class UnknownNameError(TrustlabError, KeyError, ValueError):
    """A name (method, experiment, site, config key...) is unknown; the message suggests close names."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class BudgetExceededError(TrustlabError, TimeoutError):
    """A wall-clock or compute budget ran out."""


class ScaleWarning(UserWarning):
    """A result was obtained at a scale where the paper's claim may not hold."""


class ConvergenceWarning(UserWarning):
    """An optimisation stopped before converging."""


@takes_any(name="any value: it is shown with str(); this helper writes the validator's own hints, so checking "
           "it with the rules would recurse",
           choices="any iterable; each choice is compared with str()",
           n="passed to difflib.get_close_matches (which raises for n <= 0); below the rule classes")
def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ``" Did you mean 'x'?"`` for close matches of ``name`` in ``choices`` (or ``""``)."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), choices, n=n, cutoff=0.6)
    if not close:
        lowered = str(name).lower()
        close = [c for c in choices if lowered and (lowered in c.lower() or c.lower() in lowered)][:n]
    if not close:
        return ""
    if len(close) == 1:
        return f" Did you mean '{close[0]}'?"
    return " Did you mean one of " + ", ".join(f"'{c}'" for c in close) + "?"
