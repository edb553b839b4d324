"""Offline data: scikit-learn's bundled tables and digits, aeon's bundled series, shipped text, partitioners,
generated preference pairs."""

from trustlab.data._base import Dataset
from trustlab.data.federated import partition_dirichlet, partition_iid, partition_shards
from trustlab.data.images import load_digits_images
from trustlab.data.prefs import PreferenceData, load_preferences, make_preferences
from trustlab.data.tabular import TABULAR_SETS, load_table, load_tabular
from trustlab.data.text import list_text_sets, load_text, read_jsonl
from trustlab.data.timeseries import list_timeseries, load_timeseries, load_ts_file

__all__ = [
    "Dataset", "TABULAR_SETS", "load_tabular", "load_table", "load_digits_images", "list_timeseries",
    "load_timeseries", "load_ts_file", "list_text_sets", "load_text", "read_jsonl", "partition_iid",
    "partition_dirichlet", "partition_shards", "PreferenceData", "make_preferences", "load_preferences",
]
