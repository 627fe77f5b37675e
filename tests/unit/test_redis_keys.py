"""The Redis key layout and the cluster hash-slot rule, without a server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trioqueue import ConfigurationError
from trioqueue._backends.redis._keys import (
    INFIXES,
    SUFFIXES,
    RedisKeys,
    hash_slot,
    hash_tag,
)


@pytest.mark.parametrize(
    ("key", "slot"),
    [
        ("123456789", 0x31C3 % 16384),  # the CRC16/XMODEM check value
        ("foo", 12182),  # from the Redis Cluster specification
        ("{user1000}.following", hash_slot("user1000")),
        ("{user1000}.followers", hash_slot("user1000")),
    ],
)
def test_known_slots(key, slot):
    assert hash_slot(key) == slot


@pytest.mark.parametrize(
    ("key", "tag"),
    [
        (b"plain", b"plain"),
        (b"{tag}.x", b"tag"),
        (b"x{tag}y{other}", b"tag"),  # only the first tag counts
        (b"foo{}{bar}", b"foo{}{bar}"),  # an empty first tag means the whole key
        (b"foo{{bar}}zap", b"{bar"),
        (b"{unclosed", b"{unclosed"),
    ],
)
def test_hash_tag_follows_the_cluster_rule(key, tag):
    assert hash_tag(key) == tag


@given(
    name=st.text(min_size=1, max_size=30).filter(
        # names holding an infix are refused
        lambda s: "{" not in s and "}" not in s and all(infix not in s for infix in INFIXES)
    )
)
def test_a_tagged_queue_keeps_every_key_on_one_slot(name):
    keys = RedisKeys.for_queue("{" + name + "}")
    slots = {hash_slot(k) for k in keys.all_keys().values()}
    assert slots == {hash_slot(name)}
    assert hash_slot(keys.job_prefix + "any {odd} id") == hash_slot(name)
    assert hash_slot(keys.rate_key("any {odd} key")) == hash_slot(name)
    assert hash_slot(keys.rate_line("any {odd} key")) == hash_slot(name)


def test_any_name_makes_keys_for_a_single_server():
    keys = RedisKeys.for_queue("cache.warmups")  # the seed's plain name
    assert (keys.ready, keys.processing) == ("cache.warmups", "cache.warmups.processing")
    assert keys.job_prefix == "cache.warmups.job:"


def test_on_a_cluster_an_untagged_queue_is_refused_in_one_line_with_the_tag():
    problem = RedisKeys.for_queue("cache.warmups").slot_problem()
    assert problem == (
        "queue 'cache.warmups': on a Redis Cluster every key of a queue shares one slot; "
        "name it with a hash tag, '{cache.warmups}'"
    )
    assert RedisKeys.for_queue("{cache.warmups}").slot_problem() is None


def test_on_a_cluster_a_processing_key_on_another_slot_is_refused():
    keys = RedisKeys.for_queue("{thumbnails}", processing="{other}.processing")
    assert keys.slot_problem() == (
        "queue '{thumbnails}': on a Redis Cluster every key of a queue shares its slot, "
        "and processing='{other}.processing' does not; start it with {thumbnails}"
    )
    keys = RedisKeys.for_queue("{thumbnails}", processing="{thumbnails}:inflight")
    assert keys.processing == "{thumbnails}:inflight"
    assert keys.slot_problem() is None


def test_an_empty_queue_name_is_refused():
    with pytest.raises(ConfigurationError, match="name the queue"):
        RedisKeys.for_queue("")


def test_no_key_of_a_queue_is_accepted_as_the_name_of_another():
    keys = RedisKeys.for_queue("{a}")
    taken = [
        *(key for role, key in keys.all_keys().items() if role != "ready"),
        "{a}.job:r1",
        keys.rate_key("customer-1"),
        keys.rate_line("customer-1"),
    ]
    for name in taken:
        with pytest.raises(ConfigurationError, match="is a key of another queue"):
            RedisKeys.for_queue(name)


# a name, and another that extends it: the shapes in which two queues' keys could meet
extensions = st.sampled_from(
    [*SUFFIXES, *INFIXES, ".job", ".rate", ".rateline", ".", ""]
) | st.text(max_size=6)


@given(st.sampled_from(["{t}", ""]), st.text(max_size=8), extensions, st.text(max_size=6))
def test_two_accepted_names_never_share_a_key(tag, name, extension, tail):
    def keys_of(queue: str) -> set[str] | None:
        try:
            keys = RedisKeys.for_queue(queue)
        except ConfigurationError:
            return None
        named = {k for role, k in keys.all_keys().items() if role != "job_prefix"}
        ids = ("j", tail, extension + tail)
        return (
            named
            | {keys.job_prefix + i for i in ids}
            | {keys.rate_key(i) for i in ids}
            | {keys.rate_line(i) for i in ids}
        )

    first, second = tag + name, tag + name + extension + tail
    a, b = keys_of(first), keys_of(second)
    if a is not None and b is not None and first != second:
        assert not a & b
