"""Hooks around enqueue and each attempt, and OpenTelemetry traces across them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trioqueue
from trioqueue import Queue
from trioqueue.otel import inject_trace_context, trace_attempts

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping


@pytest.mark.server_clock
async def test_an_enqueue_hook_adds_headers_to_every_job(make_backend, autojump_clock):
    backend = await make_backend()

    def tenant(headers: MutableMapping[str, str]) -> None:
        headers.setdefault("tenant", "acme")

    queue = Queue(backend, on_enqueue=[tenant])
    await queue.enqueue(1, id="a")
    await queue.enqueue(2, id="b", headers={"tenant": "other"})
    await queue.enqueue_many([3], ids=["c"])
    headers = {job_id: (await queue.status(job_id)).headers for job_id in "abc"}  # type: ignore[union-attr]
    assert headers == {"a": {"tenant": "acme"}, "b": {"tenant": "other"}, "c": {"tenant": "acme"}}


@pytest.mark.server_clock
async def test_middleware_wraps_each_attempt_outermost_first(make_backend, autojump_clock):
    backend = await make_backend()
    calls: list[str] = []

    def named(name: str) -> Callable[..., Awaitable[object]]:
        async def middleware(
            job: trioqueue.Job, call_next: Callable[[trioqueue.Job], Awaitable[object]]
        ) -> object:
            calls.append(f"{name} before {job.id}#{job.attempt}")
            try:
                return await call_next(job)
            finally:
                calls.append(f"{name} after")

        return middleware

    async def handler(job: trioqueue.Job) -> str:
        calls.append("handler")
        if job.attempt == 1:
            raise RuntimeError("once")
        return "done"

    queue = Queue(backend)
    await queue.enqueue(1, id="m")
    retry = trioqueue.RetryPolicy(base_delay=0.01, max_delay=0.01)
    middleware = [named("outer"), named("inner")]
    async with trioqueue.open_worker_pool(backend, handler, retry=retry, middleware=middleware):
        pass
    one = ["outer before m#{}", "inner before m#{}", "handler", "inner after", "outer after"]
    assert calls == [c.format(1) for c in one] + [c.format(2) for c in one]
    assert await queue.result("m") == "done"


# the global provider can be set once per process: these tests read its spans back
_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
trace.set_tracer_provider(_PROVIDER)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    _EXPORTER.clear()
    return _EXPORTER


async def test_the_handlers_span_continues_the_producers_trace(make_backend, autojump_clock, spans):
    backend = await make_backend()
    queue = Queue(backend, on_enqueue=[inject_trace_context])
    tracer = trace.get_tracer("the producer")
    with tracer.start_as_current_span("POST /orders") as request:
        await queue.enqueue({"order": 1}, id="o1", task="ship")

    async def ship(job: trioqueue.Job) -> None:
        trace.get_current_span().set_attribute("shipped", job.payload["order"])

    async def fails(job: trioqueue.Job) -> None:
        raise ValueError("no stock")

    async def stalls(job: trioqueue.Job) -> None:
        await trio.sleep(60)

    await queue.enqueue(2, id="o2", task="fails", max_attempts=1)  # no producer span
    await queue.enqueue(3, id="o3", task="stalls", max_attempts=1, handler_timeout=1)
    tasks = {"ship": ship, "fails": fails, "stalls": stalls}
    async with trioqueue.open_worker_pool(backend, tasks, middleware=[trace_attempts]):
        pass
    finished = {span.name: span for span in spans.get_finished_spans()}
    shipped = finished["ship process"]
    assert shipped.parent is not None
    assert shipped.parent.span_id == request.get_span_context().span_id
    assert shipped.context.trace_id == request.get_span_context().trace_id
    assert shipped.kind is trace.SpanKind.CONSUMER
    assert shipped.attributes is not None
    assert shipped.attributes["messaging.message.id"] == "o1"
    assert shipped.attributes["trioqueue.attempt"] == 1
    assert shipped.attributes["shipped"] == 1  # the handler's own span is this one
    failed = finished["fails process"]
    assert failed.parent is None  # enqueued outside any span: a trace of its own
    assert failed.status.status_code is trace.StatusCode.ERROR
    assert [event.name for event in failed.events] == ["exception"]
    stalled = finished["stalls process"]  # its timeout cancelled it: a failed attempt too
    assert stalled.status.status_code is trace.StatusCode.ERROR
    assert "cancelled" in (stalled.status.description or "")
