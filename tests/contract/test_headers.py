"""Job headers: a producer's metadata (trace ids, tenant, origin), carried to the handler."""

from __future__ import annotations

import pytest

import trioqueue
from trioqueue import Queue


@pytest.mark.server_clock
async def test_headers_reach_the_handler_and_the_record(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    seen: dict[str, dict[str, str]] = {}

    async def handler(job: trioqueue.Job) -> None:
        seen[job.id] = dict(job.headers)

    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    await queue.enqueue(1, id="h1", headers=headers)
    await queue.enqueue_many([2, 3], ids=["h2", "h3"], headers={"tenant": "acme"})
    await queue.enqueue(4, id="plain")
    record = await queue.status("h1")
    assert record is not None
    assert record.headers == headers
    async with trioqueue.open_worker_pool(backend, handler):
        pass
    assert seen == {"h1": headers, "h2": {"tenant": "acme"}, "h3": {"tenant": "acme"}, "plain": {}}


@pytest.mark.server_clock
async def test_headers_stay_with_a_retried_and_a_requeued_dead_letter(make_backend, autojump_clock):
    backend = await make_backend()
    queue = Queue(backend)
    seen: list[tuple[int, dict[str, str]]] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append((job.attempt, dict(job.headers)))
        raise RuntimeError("again")

    await queue.enqueue(1, id="r", headers={"origin": "web"}, max_attempts=2)
    retry = trioqueue.RetryPolicy(base_delay=0.01, max_delay=0.01)
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        pass
    await queue.requeue_dead("r")
    async with trioqueue.open_worker_pool(backend, handler, retry=retry):
        pass
    assert seen == [(n, {"origin": "web"}) for n in (1, 2, 1, 2)]


@pytest.mark.parametrize(
    ("headers", "error", "words"),
    [
        ({"a": 1}, TypeError, "str to str"),
        ({1: "a"}, TypeError, "str to str"),
        (["a"], TypeError, "a dict"),
        ({"": "x"}, ValueError, "1 to 200"),
        ({f"k{n}": "v" for n in range(65)}, ValueError, "at most 64"),
        ({"big": "x" * 9000}, ValueError, "8,192 bytes"),
    ],
)
@pytest.mark.server_clock
async def test_bad_headers_are_refused_and_nothing_is_stored(make_backend, headers, error, words):
    backend = await make_backend()
    with pytest.raises(error, match=words):
        await Queue(backend).enqueue(1, id="j", headers=headers)
    assert await backend.status("j") is None
