"""What the Redis connection makes of the cluster's redirects, before any connection."""

from __future__ import annotations

import pytest

import trioqueue
from trioqueue._backends.redis._hiredis import HiredisConnection
from trioqueue._backends.redis._keys import RedisKeys
from trioqueue._backends.redis._resp import ReplyError

KEYS = RedisKeys.for_queue("{q}")


def head() -> list[str]:
    return []


@pytest.mark.parametrize(
    "message",
    [
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "MOVED 12495 127.0.0.1:7001",
        "ASK 12495 127.0.0.1:7002",
        "CLUSTERDOWN The cluster is down",
    ],
)
async def test_on_a_cluster_a_redirect_or_try_again_is_an_outage_not_a_hand_changed_key(message):
    connection = HiredisConnection("redis://127.0.0.1:7000?cluster=yes", KEYS, head)
    refusal = await connection._refusal("the claim script", ReplyError(message))
    assert type(refusal) is trioqueue.BackendUnavailable  # waited out, and not "by hand"
    assert "changed by hand" not in str(refusal)


async def test_on_one_server_a_redirect_still_says_to_add_cluster_yes():
    connection = HiredisConnection("redis://127.0.0.1:7000", KEYS, head)
    refusal = await connection._refusal("the claim script", ReplyError("MOVED 12495 h:7001"))
    assert isinstance(refusal, trioqueue.ConfigurationError)
    assert "add ?cluster=yes to the URL" in str(refusal)


def test_max_connections_must_be_a_whole_number_in_range():
    for wrong in (0, -1, 1.5, True, 10_001):
        with pytest.raises(trioqueue.ConfigurationError, match=r"max_connections=.*: use a whole"):
            trioqueue.RedisBackend("redis://h/0", queue="{q}", max_connections=wrong)
