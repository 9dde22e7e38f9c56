"""The indented metadata JSON writer gives ``json.dumps``'s text and errors."""

from __future__ import annotations

import enum
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzarr.metadata.jsontext import dumps_indented

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
trees = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4)
    | st.lists(kids, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=30,
)


def _reference(obj, indent):
    return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(trees, st.sampled_from([0, 1, 2, 4]))
def test_same_text_as_json_dumps(obj, indent):
    assert dumps_indented(obj, indent) == _reference(obj, indent)


def _nested(depth):
    v: object = 1
    for _ in range(depth):
        v = [v]
    return v


class Level(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize(
    "obj",
    [
        {"a": np.float64(0.5), "b": [np.float64(1e300)]},  # float subclass
        {"k": Level.ONE},  # int subclass: json writes int.__repr__
        {7: "int key", 2.5: "float key", True: "bool key", None: "none key"},
        {"deep": _nested(70)},
        {"text": "µm ünits \u2028 \"quoted\" \\ \x00 \U0001f600"},
        [],
        {},
        {"e": [], "f": {}},
        "top-level string",
        -0.0,
    ],
)
def test_unusual_values_match(obj):
    for indent in (0, 2):
        assert dumps_indented(obj, indent) == _reference(obj, indent)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nan_refused_as_json_dumps_refuses(bad):
    with pytest.raises(ValueError, match="Out of range float"):
        dumps_indented({"fill_value": bad}, 2)


def test_unserializable_and_bad_keys_raise_json_errors():
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"x": object()}, 2)
    with pytest.raises(TypeError, match="keys must be"):
        dumps_indented({(1, 2): 3}, 2)


def test_cycle_raises_like_json():
    d: dict = {}
    d["self"] = d
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(d, 2)
