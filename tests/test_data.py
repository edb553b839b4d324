"""Offline loaders and federated partitioners."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustlab.core.exceptions import (
    AssetNotFoundError,
    ConfigError,
    InputError,
    MissingDependencyError,
    UnknownNameError,
)
from trustlab.core.optional import is_available
from trustlab.data import (
    load_digits_images,
    load_table,
    load_tabular,
    load_text,
    load_timeseries,
    partition_dirichlet,
    partition_iid,
)
from trustlab.data.federated import partition_shards
from trustlab.data.tabular import TABULAR_SETS
from trustlab.data.text import list_text_sets
from trustlab.data.timeseries import list_timeseries


@pytest.mark.parametrize("name", list(TABULAR_SETS))
def test_tabular_sets_load(name):
    if name == "fair":
        pytest.importorskip("statsmodels")
    ds = load_tabular(name)
    assert ds.X.ndim == 2 and len(ds.X) == len(ds.y) and len(ds.feature_names) == ds.X.shape[1]
    assert ds.provenance["source"].startswith(("sklearn", "statsmodels"))


def test_unknown_tabular_suggests():
    with pytest.raises(UnknownNameError, match="Did you mean 'wine'"):
        load_tabular("wien")


def test_user_csv_and_parquet(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0, 1, 0], "label": ["x", "y", "x"]})
    df.to_csv(tmp_path / "t.csv", index=False)
    ds = load_table(tmp_path / "t.csv", target="label")
    assert ds.X.shape == (3, 2) and list(ds.y) == ["x", "y", "x"] and ds.feature_names == ["a", "b"]
    if is_available("pyarrow"):
        df.to_parquet(tmp_path / "t.parquet")
        assert load_table(tmp_path / "t.parquet", target="label").X.shape == (3, 2)
    else:
        (tmp_path / "t.parquet").write_bytes(b"PAR1")
        with pytest.raises(MissingDependencyError, match="pyarrow"):
            load_table(tmp_path / "t.parquet", target="label")
    with pytest.raises(UnknownNameError, match="Did you mean 'label'"):
        load_table(tmp_path / "t.csv", target="lable")
    with pytest.raises(InputError, match=r"numeric.*'label' \(dtype \w+, e.g. 'x'\).*OneHotEncoder"):
        load_table(tmp_path / "t.csv")
    with pytest.raises(AssetNotFoundError):
        load_table(tmp_path / "missing.csv")


def test_digits_images_range_and_noise():
    clean = load_digits_images()
    assert clean.X.shape == (1797, 8, 8) and clean.X.min() >= 0 and clean.X.max() <= 1
    n1, n2 = load_digits_images(0.2, random_state=1), load_digits_images(0.2, random_state=1)
    assert np.array_equal(n1.X, n2.X) and not np.array_equal(n1.X, clean.X)
    assert n1.X.min() >= 0 and n1.X.max() <= 1
    assert load_digits_images(flatten=True).X.shape == (1797, 64)
    with pytest.raises(ConfigError, match="'noise' argument of load_digits_images"):
        load_digits_images(-1.0)


def test_timeseries_bundled_offline():
    names = list_timeseries()
    assert {"GunPoint", "ItalyPowerDemand", "ArrowHead"} <= set(names)
    tr, te = load_timeseries("GunPoint", "train"), load_timeseries("GunPoint", "test")
    assert tr.X.shape == (50, 1, 150) and te.X.shape[0] == 150
    assert load_timeseries("GunPoint", "all").X.shape[0] == 200
    with pytest.raises(UnknownNameError, match="GunPoint"):
        load_timeseries("GunPiont")
    with pytest.raises(ConfigError, match="'split' argument of load_timeseries"):
        load_timeseries("GunPoint", "val")


def test_text_shipped_with_provenance(tmp_path):
    assert "capital_facts" in list_text_sets()
    ds = load_text("capital_facts")
    assert len(ds) == 80 and set(ds.y) == {0, 1} and "how_made" in ds.provenance
    p = tmp_path / "mine.jsonl"
    p.write_text(json.dumps({"text": "hi", "label": 1}) + "\n" + json.dumps({"text": "yo", "label": 0}) + "\n")
    assert list(load_text(p).X) == ["hi", "yo"]
    p.write_text("{not json}\n")
    with pytest.raises(InputError, match="line 1"):
        load_text(p)
    with pytest.raises(UnknownNameError, match="capital_facts"):
        load_text("capitol_facts")


def _check_partition(parts, n):
    allidx = np.concatenate(parts)
    assert len(allidx) == n and len(np.unique(allidx)) == n  # disjoint and complete


labels = st.lists(st.integers(0, 4), min_size=20, max_size=200).map(np.asarray)


@given(labels, st.integers(1, 8), st.integers(0, 10))
def test_iid_partition(y, k, seed):
    parts = partition_iid(y, k, random_state=seed)
    _check_partition(parts, len(y))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert all(np.array_equal(a, b) for a, b in zip(parts, partition_iid(y, k, random_state=seed)))


@given(labels, st.integers(1, 6), st.floats(0.05, 10.0), st.integers(0, 10))
def test_dirichlet_partition(y, k, alpha, seed):
    try:
        parts = partition_dirichlet(y, k, alpha, random_state=seed)
    except InputError:
        return  # no valid draw with >= 1 sample per client: refused loudly, never silently wrong
    _check_partition(parts, len(y))
    assert all(len(p) >= 1 for p in parts)
    assert all(np.array_equal(a, b) for a, b in zip(parts, partition_dirichlet(y, k, alpha, random_state=seed)))


@given(labels, st.integers(1, 5), st.integers(1, 3), st.integers(0, 10))
def test_shard_partition(y, k, s, seed):
    if k * s > len(y):
        with pytest.raises(InputError):
            partition_shards(y, k, s, seed=seed)
        return
    parts = partition_shards(y, k, s, seed=seed)
    _check_partition(parts, len(y))
    assert all(np.array_equal(a, b) for a, b in zip(parts, partition_shards(y, k, s, seed=seed)))


def test_dirichlet_skew_grows_as_alpha_shrinks():
    y = np.repeat(np.arange(10), 100)

    def skew(alpha):
        parts = partition_dirichlet(y, 10, alpha, random_state=0)
        return np.mean([np.bincount(y[p], minlength=10).max() / len(p) for p in parts])

    assert skew(0.1) > skew(100.0) + 0.3


def test_partition_bad_args():
    with pytest.raises(ConfigError, match="n_clients"):
        partition_iid(np.arange(5), 0)
    with pytest.raises(InputError, match="at least one sample per client"):
        partition_iid(np.arange(3), 5)


def test_categorical_column_error_names_the_column_and_hints_at_encoding():
    """Issue 15: a categorical column used to fail with "could not convert string to float: 'Nice'"."""
    from trustlab.core.arguments import ArrayLike
    from trustlab.core.constraints import validate_value
    from trustlab.core.validation import check_array

    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"age": [30, 40], "city": pd.Categorical(["Nice", "Paris"])})
    with pytest.raises(InputError, match=r"'X' argument of Model must hold numbers.*'city' \(dtype category, "
                                         r"e.g. 'Nice'\).*encode them first"):
        check_array(df, owner="Model")
    with pytest.raises(InputError, match=r"'city'.*OrdinalEncoder"):
        validate_value("fit", "X", df, [ArrayLike(ndim=2)], noun="argument")
    assert check_array(df[["age"]]).shape == (2, 1)


def test_user_file_errors_name_the_file_and_the_line(tmp_path):
    """Issue 43: errors reading a user's JSONL or CSV name the file and the line (blank lines counted)."""
    from trustlab.data import load_table, read_csv, read_jsonl
    from trustlab.methods.dint import load_task_jsonl

    j = tmp_path / "task.jsonl"
    j.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n\n" + json.dumps({"prompt": "2+2="}) + "\n")
    assert read_jsonl(j).line_of(1) == 3
    with pytest.raises(InputError, match=r"task\.jsonl line 3 needs non-empty string fields"):
        load_task_jsonl(j)
    j.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"line 2 is not UTF-8"):
        read_jsonl(j)
    c = tmp_path / "t.csv"
    c.write_text("a,b\n1,2\n3,4,5\n")
    with pytest.raises(InputError, match=r"t\.csv line 3 cannot be parsed as CSV"):
        read_csv(c)
    with pytest.raises(InputError, match=r"t\.csv line 3"):
        load_table(c, target="a")
    c.write_bytes(b"a,b\n1,2\n\xff,3\n")
    with pytest.raises(InputError, match=r"t\.csv line 3 is not UTF-8"):
        read_csv(c)
    c.write_text("")
    with pytest.raises(InputError, match="is empty"):
        read_csv(c)


def test_partitioners_and_digits_take_the_deprecated_seed_keyword():
    y = np.arange(40) % 4
    with pytest.warns(FutureWarning, match="random_state"):
        old = partition_iid(y, 4, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(old, partition_iid(y, 4, random_state=3)))
    with pytest.warns(FutureWarning):
        old = partition_dirichlet(y, 4, 1.0, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(old, partition_dirichlet(y, 4, 1.0, random_state=3)))
    rng = np.random.default_rng(0)
    assert len(partition_iid(y, 4, random_state=rng)) == 4  # a Generator is accepted too
    with pytest.warns(FutureWarning):
        a = load_digits_images(0.2, seed=1)
    assert np.array_equal(a.X, load_digits_images(0.2, random_state=1).X) and a.name.endswith("seed=1)")
