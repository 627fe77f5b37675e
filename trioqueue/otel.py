"""OpenTelemetry for trioqueue: a trace that goes from the producer's span into the handler's.

``pip install 'trioqueue[otel]'`` (the OpenTelemetry API; install the SDK and an
exporter as for any traced program). Two parts, used together::

    queue = trioqueue.Queue(backend, on_enqueue=[inject_trace_context])
    async with trioqueue.open_worker_pool(backend, handler, middleware=[trace_attempts]):
        ...

`inject_trace_context` writes the caller's trace context into each job's headers
(W3C ``traceparent``, through the globally configured propagator), and
`trace_attempts` runs each attempt in a span (kind CONSUMER, named ``"<task>
process"``) that continues that trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from opentelemetry import propagate, trace

from ._util import public_dir as _public_dir

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

    from ._records import Job

__all__ = ["inject_trace_context", "trace_attempts"]


def __dir__() -> list[str]:
    """The public names: see `trioqueue._util.public_dir`."""
    return _public_dir(__all__, globals())


_TRACER = "trioqueue"


def inject_trace_context(headers: MutableMapping[str, str]) -> None:
    """An enqueue hook: put the current trace context into the job's *headers*.

    Outside any span it adds nothing, and the handler's span starts a trace of its own.
    """
    propagate.inject(headers)


async def trace_attempts(job: Job, call_next: Callable[[Job], Awaitable[object]]) -> object:
    """Pool middleware: run the attempt in a span continuing the producer's trace.

    The span is named ``"<task> process"`` (``"job process"`` without a task), of
    kind CONSUMER, with ``messaging.system`` (``trioqueue``), ``messaging.message.id``
    (the job id), ``trioqueue.attempt`` and, with a task, ``trioqueue.task``. An
    exception the handler raises is recorded on it, with the status ERROR (a
    cancelled attempt, by a timeout or a shutdown, ends with ERROR too); the
    handler's own spans (``trace.get_current_span()``) are this one and its children.
    """
    parent = propagate.extract(job.headers)
    attributes: dict[str, str | int] = {
        "messaging.system": "trioqueue",
        "messaging.operation.type": "process",
        "messaging.message.id": job.id,
        "trioqueue.attempt": job.attempt,
    }
    if job.task is not None:
        attributes["trioqueue.task"] = job.task
    with trace.get_tracer(_TRACER).start_as_current_span(
        f"{job.task or 'job'} process",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes,
    ) as span:
        try:
            return await call_next(job)
        except trio.Cancelled:
            # a BaseException, which the span does not record by itself
            span.set_status(
                trace.Status(
                    trace.StatusCode.ERROR,
                    "cancelled: a handler timeout, a cancel of the job, or a shutdown",
                )
            )
            raise
