"""A Queue call given something else than a job id says what to pass, and changes nothing."""

from __future__ import annotations

import pytest

import trioqueue

FIX = r"pass receipt\.id$"


@pytest.mark.parametrize("call", ["result", "cancel", "status", "purge_dead", "requeue_dead"])
async def test_a_receipt_given_for_a_job_id_is_refused_with_the_fix(call: str):
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    receipt = await queue.enqueue({"to": "a@example.com"}, id="j1")
    with pytest.raises(TypeError, match=rf"^Queue\.{call}: a job id is a str, not Receipt; {FIX}"):
        await getattr(queue, call)(receipt)
    record = await queue.status(receipt.id)  # the job is as it was
    assert record is not None
    assert record.state is trioqueue.JobState.RECEIVED


async def test_results_refuses_a_receipt_among_the_ids():
    queue = trioqueue.Queue(trioqueue.MemoryBackend())
    receipt = await queue.enqueue(1, id="j1")

    async def wait() -> None:
        async with queue.results(["j0", receipt]) as results:  # type: ignore[list-item]
            async for _ in results:
                pass

    with pytest.raises(TypeError, match=rf"^Queue\.results: .* not Receipt; {FIX}"):
        await wait()


async def test_another_type_is_refused_with_what_to_pass():
    queue = trioqueue.Queue(trioqueue.MemoryBackend())
    with pytest.raises(TypeError, match=r"^Queue\.status: a job id is a str, not int; pass the"):
        await queue.status(7)  # type: ignore[arg-type]
