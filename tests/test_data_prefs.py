"""Generated preference data with verifiable rewards, and user preference JSONL."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trustlab.core.exceptions import AssetNotFoundError, ConfigError, InputError
from trustlab.data.prefs import (
    PREFERENCE_TASKS,
    exact_match,
    first_integer,
    load_preferences,
    make_preferences,
    verify_response,
)


def test_generation_is_deterministic_and_verifiable():
    a, b, c = make_preferences(200, random_state=0), make_preferences(200, random_state=0), make_preferences(200, random_state=1)
    assert a.prompts == b.prompts and a.rejected == b.rejected and a.prompts != c.prompts
    assert len(set(a.prompts)) == 200 and set(a.tasks) == set(PREFERENCE_TASKS)
    assert np.all(a.reward(a.chosen) == 1.0)
    rej = a.reward(a.rejected)
    kinds = np.asarray(a.kinds)
    assert np.all(rej[kinds == "wrong"] == 0.0) and np.all(rej[kinds == "rambling"] == 0.5)
    assert 0.25 < np.mean(kinds == "rambling") < 0.55
    counts = {t: a.tasks.count(t) for t in PREFERENCE_TASKS}
    assert counts == {"arithmetic": 80, "capitals": 40, "units": 40, "one_word": 40}
    assert all(len(r.split()) > 10 for r, k in zip(a.rejected, a.kinds) if k == "rambling")


def test_length_matched_pairs_carry_no_length_signal():
    """match_length (issue 47): every rejected is wrong, numbers keep their digit count, words the nearest length."""
    d = make_preferences(300, rambling_fraction=0.0, match_length=True, random_state=3)
    assert set(d.kinds) == {"wrong"} and np.all(d.reward(d.rejected) == 0.0) and np.all(d.reward(d.chosen) == 1.0)
    num = [i for i, t in enumerate(d.tasks) if t in ("arithmetic", "units")]
    assert num and all(len(d.chosen[i]) == len(d.rejected[i]) for i in num)
    assert np.mean([len(c) == len(r) for c, r in zip(d.chosen, d.rejected)]) > 0.9
    assert d.provenance["match_length"] is True
    plain = make_preferences(300, rambling_fraction=0.0, random_state=3)
    assert np.mean([len(c) == len(r) for c, r in zip(plain.chosen, plain.rejected)]) < 0.9
    with pytest.raises(ConfigError, match="rambling_fraction"):
        make_preferences(10, match_length=True)  # the default 0.4 rambling would bring the length shortcut back


def test_split_keeps_facts_on_one_side():
    d = make_preferences(300, random_state=2)
    train, test = d.split(60, random_state=0)
    assert len(train) + len(test) == 300 and 60 <= len(test) < 70
    assert not set(train.keys) & set(test.keys)
    assert not set(train.prompts) & set(test.prompts)
    t2, _ = d.split(0.2, random_state=0)
    assert t2.prompts == train.prompts
    with pytest.raises(ConfigError, match="test_size"):
        d.split(300)


def test_rewards():
    assert verify_response("arithmetic", "42", "42") == 1.0
    assert verify_response("arithmetic", "42", "The answer is 42.") == 1.0
    assert verify_response("arithmetic", "42", "I think that the answer is 42 here") == 0.5
    assert verify_response("arithmetic", "42", "43") == 0.0
    assert verify_response("units", "1200", "1,200") == 1.0
    assert verify_response("capitals", "Paris", "Paris.") == 1.0
    assert verify_response("capitals", "Paris", "Berlin, not Paris") == 0.0
    assert verify_response("capitals", "Mexico City", "Mexico City") == 1.0
    assert verify_response("one_word", "Blue", "blue") == 1.0
    assert verify_response("one_word", "Blue", "It is blue") == 0.5
    assert verify_response("one_word", "Blue", "Green") == 0.0
    assert verify_response("custom", "yes", " Yes! ") == 1.0
    assert first_integer("no digits") is None and first_integer("-7 apples") == -7
    assert exact_match("Hello, World", "hello world")
    with pytest.raises(ConfigError, match="The 'max_words' argument of verify_response"):
        verify_response("arithmetic", "1", "1", max_words=0)


def test_bad_generation_arguments():
    with pytest.raises(ConfigError, match="The 'tasks' argument of make_preferences"):
        make_preferences(10, tasks=["poetry"])
    with pytest.raises(ConfigError, match="at most 120 distinct 'capitals'"):
        make_preferences(200, tasks=["capitals"])
    with pytest.raises(ConfigError, match="one weight per task"):
        make_preferences(10, tasks=["arithmetic"], weights=[1.0, 2.0])


def test_jsonl_round_trip_and_validation(tmp_path):
    d = make_preferences(12, random_state=3)
    path = d.to_jsonl(tmp_path / "p.jsonl")
    back = load_preferences(path)
    assert back.prompts == d.prompts and back.keys == d.keys and np.all(back.reward(back.chosen) == 1.0)

    def write(rows):
        p = tmp_path / "u.jsonl"
        p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return p

    user = load_preferences(write([{"prompt": "Hi", "chosen": "Hello!", "rejected": "Go away."}]))
    assert user.tasks == ["custom"] and user.kinds == ["user"] and np.isnan(user.reward(["x"])[0])
    with pytest.raises(InputError, match="row 2: the field 'rejected' must be a non-empty string. Got missing"):
        load_preferences(write([{"prompt": "a", "chosen": "b", "rejected": "c"}, {"prompt": "a", "chosen": "b"}]))
    with pytest.raises(InputError, match="field 'chosen' must be a non-empty string"):
        load_preferences(write([{"prompt": "a", "chosen": "  ", "rejected": "c"}]))
    with pytest.raises(InputError, match="optional field 'task'"):
        load_preferences(write([{"prompt": "a", "chosen": "b", "rejected": "c", "task": 3}]))
    with pytest.warns(UserWarning, match="skipped 1 row"):
        kept = load_preferences(write([{"prompt": "a", "chosen": "b", "rejected": "b"},
                                       {"prompt": "a", "chosen": "b", "rejected": "c"}]))
    assert len(kept) == 1
    with pytest.raises(AssetNotFoundError):
        load_preferences(tmp_path / "missing.jsonl")
