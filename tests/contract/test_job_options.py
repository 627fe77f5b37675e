"""A job's own attempts and handler timeout, stored with it, come before the pool's."""

from __future__ import annotations

import math

import pytest
import trio

import trioqueue
from trioqueue import JobState, Queue, RetryPolicy


@pytest.mark.server_clock
async def test_a_claim_carries_the_options_its_producer_stored(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("a", id="a", max_attempts=3, handler_timeout=2.5)
    await queue.enqueue("b", id="b")
    claims = await backend.claim(2, lease=30, block=0)
    options = {c.job.id: (c.job.max_attempts, c.job.handler_timeout) for c in claims}
    assert options == {"a": (3, 2.5), "b": (None, None)}
    for claim in claims:
        assert await backend.ack(claim)


@pytest.mark.server_clock
async def test_a_jobs_max_attempts_overrides_the_pools_policy(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    attempts: dict[str, list[int]] = {"once": [], "thrice": [], "pools": []}

    async def failing(job: trioqueue.Job) -> None:
        attempts[job.id].append(job.attempt)
        raise RuntimeError("still down")

    await queue.enqueue(1, id="once", max_attempts=1)
    await queue.enqueue(2, id="thrice", max_attempts=3)
    await queue.enqueue(3, id="pools")
    policy = RetryPolicy(max_attempts=2, base_delay=0.1, max_delay=0.1)
    async with trioqueue.open_worker_pool(backend, failing, retry=policy):
        pass
    assert attempts == {"once": [1], "thrice": [1, 2, 3], "pools": [1, 2]}
    dead = {record.id: record.attempts for record in await backend.dead_letters()}
    assert dead == {"once": 1, "thrice": 3, "pools": 2}


async def test_a_jobs_handler_timeout_overrides_the_pools(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    finished: list[str] = []

    async def slow(job: trioqueue.Job) -> None:
        await trio.sleep(10)
        finished.append(job.id)

    await queue.enqueue(1, id="short", max_attempts=1, handler_timeout=2)
    await queue.enqueue(2, id="pools")  # the pool has no timeout: it runs its 10 s
    async with trioqueue.open_worker_pool(backend, slow, workers=2):
        pass
    assert finished == ["pools"]
    record = await backend.status("short")
    assert record is not None
    assert record.state is JobState.FAILED
    assert record.last_error is not None
    assert record.last_error.type == "TimeoutError"
    assert "handler_timeout=2.0s" in record.last_error.message


@pytest.mark.server_clock
async def test_options_are_no_part_of_the_jobs_identity(make_backend, autojump_clock):
    """Like the due time: the same id and payload again is the job, whose options stand."""
    backend = await make_backend()
    queue = Queue(backend)
    await queue.enqueue("p", id="j", max_attempts=2)
    again = await queue.enqueue("p", id="j", max_attempts=9, handler_timeout=1)
    assert again.deduplicated
    [claim] = await backend.claim(1, lease=30, block=0)
    assert (claim.job.max_attempts, claim.job.handler_timeout) == (2, None)
    assert await backend.ack(claim)


@pytest.mark.server_clock
async def test_a_misspelled_option_is_a_type_error_that_lists_them(make_backend):
    queue = Queue(await make_backend())
    with pytest.raises(TypeError, match=r"'dealy': a job takes id=, and delay=, at=,"):
        await queue.enqueue("p", id="j", dealy=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"'dealy'"):
        await queue.submit_many(["p"], ids=["k"], dealy=5)  # type: ignore[call-arg]
    assert await queue.status("j") is None


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"max_attempts": 0}, ValueError, "at least one attempt"),
        ({"max_attempts": "3"}, TypeError, "whole number"),
        ({"max_attempts": True}, TypeError, "whole number"),
        ({"handler_timeout": 0}, ValueError, "more than 0"),
        ({"handler_timeout": math.nan}, ValueError, "more than 0"),
        ({"handler_timeout": 1e12}, ValueError, "100 years"),
        ({"handler_timeout": "5"}, TypeError, "seconds"),
        ({"priority": 3}, ValueError, r"priority=3: .* -2 to 2"),
        ({"priority": -3}, ValueError, "-2 to 2"),
        ({"priority": 1.5}, TypeError, "whole number"),
        ({"priority": True}, TypeError, "whole number"),
    ],
)
@pytest.mark.server_clock
async def test_bad_options_are_refused_and_nothing_is_stored(make_backend, options, error, words):
    backend = await make_backend()
    queue = Queue(backend)
    with pytest.raises(error, match=words):
        await queue.enqueue("p", id="j", **options)
    with pytest.raises(error, match=words):
        await queue.submit_many(["p"], ids=["k"], **options)
    assert await backend.status("j") is None
    assert await backend.status("k") is None
