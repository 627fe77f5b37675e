"""``after=`` is checked before anything is sent, and every refusal says what to pass."""

from __future__ import annotations

import pytest

import trioqueue
from trioqueue._job_checks import MAX_AFTER
from trioqueue._job_input import prepare


def test_receipts_and_ids_are_kept_once_each_in_order():
    receipt = trioqueue.Receipt(id="r1", deduplicated=False, queued=True)
    job = prepare(1, "child", after=["b", receipt, "b", "a"])
    assert job.after == ("b", "r1", "a")
    assert prepare(1, "child").after == ()
    assert prepare(1, "child", after=iter(["a"])).after == ("a",)


@pytest.mark.parametrize(
    ("after", "error", "message"),
    [
        ("parent", TypeError, r"after= takes a list of job ids \(or Receipts\), not str"),
        (7, TypeError, r"after= takes a list of job ids \(or Receipts\), not int"),
        ([7], TypeError, r"an id in after= must be a str, not int"),
        ([""], ValueError, r"an id in after= must be 1 to 256 characters long, got 0"),
        (["child"], ValueError, r"job 'child' cannot run after itself"),
        ([f"p{n}" for n in range(MAX_AFTER + 1)], ValueError, r"at most 100 jobs, got 101"),
    ],
)
def test_a_bad_after_is_refused_with_what_to_do(after, error, message):
    with pytest.raises(error, match=message):
        prepare(1, "child", after=after)


def test_after_with_a_due_time_is_refused():
    with pytest.raises(TypeError, match=r"after=\[\.\.\.\] other jobs or at a due time"):
        prepare(1, "child", after=["a"], delay=5)


async def test_a_bad_chain_sends_nothing():
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    with pytest.raises(TypeError, match=r"^job 1 of the batch \(nothing was sent\): .*due time"):
        await queue.enqueue_chain([1, 2], delay=5)
    assert await backend.pending() == 0


async def test_a_chain_starts_after_the_jobs_after_names():
    queue = trioqueue.Queue(trioqueue.MemoryBackend())
    await queue.enqueue(0, id="first")
    receipts = await queue.enqueue_chain([1, 2], ids=["a", "b"], after=["first"])
    assert all(isinstance(r, trioqueue.Receipt) and r.deferred for r in receipts)
    a, b = await queue.status("a"), await queue.status("b")
    assert a is not None
    assert b is not None
    assert (a.after, b.after) == (("first",), ("a",))


async def test_a_sharded_queue_refuses_after_before_sending():
    from trioqueue import ShardedBackend

    # nothing is sent: the URL names no server
    backend = ShardedBackend.on_redis("redis://127.0.0.1:1/0", queue="s", shards=2, min_idle=5)
    with pytest.raises(ValueError, match="a sharded queue cannot run a job after others"):
        await trioqueue.Queue(backend).enqueue(1, after=["x"])
