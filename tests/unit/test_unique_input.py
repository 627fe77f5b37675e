"""``unique_key=`` and ``debounce=`` are checked before anything is sent."""

from __future__ import annotations

import datetime

import pytest

import trioqueue
from trioqueue._job_input import prepare


def test_a_debounce_is_the_jobs_delay_and_marks_it():
    job = prepare(1, "j", unique_key="k", debounce=datetime.timedelta(seconds=3))
    assert (job.unique_key, job.debounce, job.delay) == ("k", True, 3.0)
    plain = prepare(1, "j", unique_key="k")
    assert (plain.unique_key, plain.debounce, plain.delay) == ("k", False, None)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"unique_key": 7}, TypeError, r"a unique_key must be a str, not int"),
        ({"unique_key": ""}, ValueError, r"a unique_key must be 1 to 256 characters long"),
        ({"debounce": 5}, TypeError, r"debounce= needs a unique_key="),
        ({"unique_key": "k", "debounce": 5, "delay": 1}, TypeError, r"without delay=, at="),
        ({"unique_key": "k", "debounce": 5, "after": ["p"]}, TypeError, r"or after="),
        ({"unique_key": "k", "debounce": 0}, ValueError, r"debounce=0: give a number of sec"),
        ({"unique_key": "k", "debounce": -1}, ValueError, r"^debounce=-1: use a finite number"),
        ({"unique_key": "k", "debounce": "soon"}, TypeError, r"^debounce= takes seconds"),
    ],
)
def test_a_bad_key_or_debounce_is_refused_with_what_to_do(options, error, message):
    with pytest.raises(error, match=message):
        prepare(1, "j", **options)


async def test_a_sharded_queue_refuses_a_unique_key_before_sending():
    backend = trioqueue.ShardedBackend.on_redis(
        "redis://127.0.0.1:1/0", queue="s", shards=2, min_idle=5
    )
    with pytest.raises(ValueError, match="cannot keep one job per unique_key"):
        await trioqueue.Queue(backend).enqueue(1, unique_key="k")


@pytest.mark.parametrize("options", [{"unique_key": "k"}, {"debounce": 5}])
async def test_a_chain_refuses_a_key_naming_the_chain(options):
    queue = trioqueue.Queue(trioqueue.MemoryBackend())
    with pytest.raises(TypeError, match="enqueue_chain takes no unique_key= or debounce="):
        await queue.enqueue_chain([1, 2], **options)
    assert await queue.backend.pending() == 0
