"""Canonical JSON lines: ``dumps_line`` writes ``json.dumps``' text, whichever encoder
makes it, and ``round_floats`` rounds what it must and keeps the rest."""

from __future__ import annotations

import enum
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragvet.storage.files import dumps_line, round_floats


def json_line(value) -> str:
    """The canonical line as the standard library writes it: the reference."""
    return json.dumps(round_floats(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    """A text subclass, which json writes as its text."""


def test_small_floats_big_integers_and_subclasses_are_written_as_json_writes_them():
    value = {"b": 1e-06, "a": [0.5, 2.5e-05, 0.0001, 12.0], "é": "x"}
    assert dumps_line(value) == '{"a":[0.5,2.5e-05,0.0001,12.0],"b":1e-06,"é":"x"}' == json_line(value)
    value = {"Z": 2**70, "lvl": Level.HIGH, Name("n"): Name("v"), "np": [np.float64(0.1), np.float64(2e-5)]}
    assert dumps_line(value) == '{"Z":1180591620717411303424,"lvl":3,"n":"v","np":[0.1,2e-05]}' == json_line(value)
    with pytest.raises(TypeError, match="float32 is not JSON serializable") as refused:
        dumps_line({"a": np.float32(0.5)})  # refused as json refuses it, one error with no other behind it
    assert refused.value.__context__ is None
    # Text that reads like a small float is kept as it is.
    assert dumps_line({"q": "0.00001 or 2e-5?"}) == '{"q":"0.00001 or 2e-5?"}'
    # Every control character escaped as json escapes it; U+2028 and DEL kept as they are.
    text = "".join(map(chr, range(32))) + '"\\\x7f\u2028\U0001f600'
    assert dumps_line([text]) == json_line([text])
    assert dumps_line([text]).startswith('["\\u0000\\u0001') and "\\b\\t\\n\\u000b\\f\\r" in dumps_line([text])
    # A key that is not text is written by its text; -0.0, NaN and infinities as round_floats makes them.
    assert dumps_line({2: -0.0, "1": [math.nan, -math.inf, 1 / 3]}) == '{"1":[null,null,0.333333],"2":0.0}'
    # Keys in code point order: an astral character after every character of the BMP.
    assert dumps_line({"\U0001f600": 1, "\uffff": 2, "z": 3, "Z": 4}) == '{"Z":4,"z":3,"\uffff":2,"\U0001f600":1}'


def test_a_lone_surrogate_is_written_as_json_writes_it():
    """No UTF-8 file can hold it (the readers refuse it at its line first), but the line is json's."""
    assert dumps_line({"id": "a\ud800"}) == '{"id":"a\ud800"}'


_TEXTS = st.text(st.characters(codec="utf-8") | st.sampled_from("\n\x00\u2028"), max_size=6) | st.sampled_from(
    ["0.0000", "2e-5", "\ud800"]
)
_FLOATS = st.floats() | st.floats(min_value=-1e-3, max_value=1e-3) | st.sampled_from([1e-06, 5e-05, 1e16, 1e-300])
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _FLOATS | _TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner) | st.dictionaries(_TEXTS, inner, max_size=4),
    max_leaves=16,
)


@settings(max_examples=500, deadline=None)
@given(_VALUES)
def test_property_dumps_line_is_the_standard_librarys_text(value):
    assert dumps_line(value) == json_line(value)


def test_round_floats_rounds_nested_floats_and_keeps_the_rest_as_it_is():
    name = Name("kept")
    value = {"a": [1.23456789, ("x", True, None)], 3: {"b": -1e-9}, "c": name, "d": 7}
    rounded = round_floats(value)
    assert rounded == {"a": [1.234568, ["x", True, None]], "3": {"b": 0.0}, "c": "kept", "d": 7}
    assert rounded["c"] is name and type(rounded["3"]["b"]) is float
