"""Payloads: canonical JSON, its hash, and fresh job ids."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import attrs
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from trioqueue._payload import (
    MAX_DEPTH,
    MAX_ID_LENGTH,
    canonical_json,
    new_job_id,
    payload_hash,
    reply_id,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=25,
)
json_dicts = st.dictionaries(st.text(max_size=10), json_values, min_size=1, max_size=8)


def reorder(value: Any, key: Any) -> Any:
    """The same JSON value with every dict's keys inserted in a different order."""
    if isinstance(value, dict):
        return {k: reorder(value[k], key) for k in sorted(value, key=key)}
    if isinstance(value, list):
        return [reorder(item, key) for item in value]
    return value


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


class TestCanonicalJson:
    def test_example(self):
        payload = {"b": 1, "a": [1, 2.5, None, True], "c": {"z": "x", "y": {}}}
        assert canonical_json(payload) == b'{"a":[1,2.5,null,true],"b":1,"c":{"y":{},"z":"x"}}'

    def test_utf8_not_escaped(self):
        assert canonical_json({"k": "é✓"}) == '{"k":"é✓"}'.encode()

    @given(payload=json_dicts)
    def test_key_order_independent(self, payload):
        encoded = canonical_json(payload)
        assert canonical_json(reversed_keys(payload)) == encoded
        assert canonical_json(reorder(payload, key=lambda k: (len(k), k[::-1]))) == encoded

    @given(payload=json_dicts, data=st.data())
    def test_key_order_independent_any_permutation(self, payload, data):
        keys = data.draw(st.permutations(list(payload)))
        shuffled = {k: payload[k] for k in keys}
        assert list(shuffled) == keys
        assert canonical_json(shuffled) == canonical_json(payload)

    @given(payload=json_values)
    def test_round_trips(self, payload):
        encoded = canonical_json(payload)
        assert isinstance(encoded, bytes)
        assert json.loads(encoded.decode("utf-8")) == payload

    @given(payload=json_dicts)
    def test_keys_sorted_at_top_level(self, payload):
        decoded = json.loads(canonical_json(payload))
        assert list(decoded) == sorted(payload)

    @pytest.mark.parametrize(
        "payload",
        [
            {1, 2},
            b"bytes",
            object(),
            math.nan,
            math.inf,
            -math.inf,
            {"nested": [1, {"deep": {3}}]},
            {"n": math.nan},
            [b"x"],
            {("tuple", "key"): 1},
        ],
        ids=lambda p: "object()" if type(p) is object else repr(p),
    )
    def test_non_json_raises_type_error(self, payload):
        with pytest.raises(TypeError, match="JSON-serialisable"):
            canonical_json(payload)

    def test_error_names_the_offending_type(self):
        with pytest.raises(TypeError, match="set"):
            canonical_json({"a": {1}})


class TestPayloadHash:
    def test_is_hex_sha256(self):
        digest = payload_hash(canonical_json({"a": 1}))
        assert re.fullmatch(r"[0-9a-f]{64}", digest)
        # sha256(b'{"a":1}')
        assert digest == "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"

    @given(payload=json_dicts)
    def test_equal_for_reordered_dicts(self, payload):
        assert payload_hash(canonical_json(reversed_keys(payload))) == payload_hash(
            canonical_json(payload)
        )

    @given(first=json_values, second=json_values)
    def test_differs_for_different_payloads(self, first, second):
        assume(canonical_json(first) != canonical_json(second))
        assert payload_hash(canonical_json(first)) != payload_hash(canonical_json(second))

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ({"a": 1}, {"a": 2}),
            ({"a": 1}, {"b": 1}),
            ([1, 2], [2, 1]),
            ({"a": 1}, [["a", 1]]),
            ("1", 1),
            (1, True),
            (None, "null"),
        ],
    )
    def test_examples_differ(self, first, second):
        assert payload_hash(canonical_json(first)) != payload_hash(canonical_json(second))


class TestNewJobId:
    def test_is_32_lowercase_hex(self):
        for _ in range(100):
            assert re.fullmatch(r"[0-9a-f]{32}", new_job_id())

    def test_unique(self):
        ids = {new_job_id() for _ in range(10_000)}
        assert len(ids) == 10_000


class TestReplyId:
    def test_a_short_id_gets_a_suffix(self):
        assert reply_id("up-1") == "up-1:reply"
        longest = "x" * (MAX_ID_LENGTH - len(":reply"))
        assert reply_id(longest) == longest + ":reply"  # exactly the longest id

    def test_a_long_id_is_hashed_into_a_valid_one(self):
        job_id = "é" * (MAX_ID_LENGTH - len(":reply") + 1)
        expected = "reply:" + hashlib.sha256(job_id.encode("utf-8")).hexdigest()
        assert reply_id(job_id) == expected


def nested(depth: int) -> object:
    value: object = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


class TestDepth:
    def test_the_deepest_payload_allowed_encodes(self):
        assert canonical_json(nested(MAX_DEPTH)).count(b"[") == MAX_DEPTH // 2

    def test_a_payload_one_level_deeper_is_refused_with_the_limit(self):
        with pytest.raises(ValueError, match=rf"more than {MAX_DEPTH} levels deep; flatten it"):
            canonical_json(nested(MAX_DEPTH + 1))

    def test_a_payload_deeper_than_pythons_stack_is_refused_not_a_recursion_error(self):
        with pytest.raises(ValueError, match="levels deep"):
            canonical_json(nested(5_000))


def test_a_lone_surrogate_in_a_payload_or_an_id_is_refused_saying_so():
    from trioqueue._job_input import prepare
    from trioqueue._payload import canonical_json

    half = "\ud800"  # what json.loads makes of "\ud800": half of a character
    with pytest.raises(ValueError, match="lone surrogate"):
        canonical_json({"text": half})
    with pytest.raises(ValueError, match="lone surrogate"):
        prepare(1, "id-" + half)
    assert prepare(1, "WE\U000a3e7f").id == "WE\U000a3e7f"  # a whole character is fine


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=20,
)


def depth_of(value: object) -> int:
    """How deep *value* nests lists and dicts (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


@given(json_values, st.integers(min_value=0, max_value=130), st.sampled_from("LDA"))
def test_a_payload_is_refused_for_depth_exactly_when_it_nests_too_deep(inner, wraps, kind):
    # the depth is checked only for encodings longer than two brackets a level: the
    # shortcut must refuse and accept exactly what the full check does (lists alone
    # are the shortest encoding of a depth)
    payload: object = inner
    for level in range(wraps):
        as_list = kind == "L" or (kind == "A" and level % 2)
        payload = [payload] if as_list else {"k": payload}
    if depth_of(payload) > MAX_DEPTH:
        with pytest.raises(ValueError, match="levels deep"):
            canonical_json(payload)
    else:
        assert json.loads(canonical_json(payload)) == payload


@given(json_values, st.none() | st.text(min_size=1, max_size=8))
def test_a_job_without_options_is_prepared_as_prepare_makes_it(payload, job_id):
    from trioqueue._job_input import prepare, prepare_plain

    plain, full = prepare_plain(payload, job_id), prepare(payload, job_id)
    if job_id is None:  # each makes a fresh id: all else is the same
        plain = attrs.evolve(plain, id=full.id)
    assert plain == full
