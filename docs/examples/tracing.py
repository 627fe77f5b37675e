"""How-to: one OpenTelemetry trace from the request that enqueued a job to its handler."""

import trio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trioqueue
from trioqueue.otel import inject_trace_context, trace_attempts

# set up once per program; a service exports to its collector (OTLP) instead
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("shop")


async def ship(job: trioqueue.Job) -> None:
    with tracer.start_as_current_span("call the carrier"):
        await trio.sleep(0.01)


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend, on_enqueue=[inject_trace_context])
    with tracer.start_as_current_span("POST /orders"):
        await queue.enqueue({"order": 7}, id="ship-7", task="ship")
    async with trioqueue.open_worker_pool(backend, {"ship": ship}, middleware=[trace_attempts]):
        pass
    spans = {span.context.span_id: span for span in exporter.get_finished_spans()}
    for span in sorted(spans.values(), key=lambda span: span.start_time or 0):
        parent = spans.get(span.parent.span_id) if span.parent else None
        print(f"{span.name!r} ({span.kind.name}), child of {parent.name if parent else None!r}")
    print("one trace:", len({span.context.trace_id for span in spans.values()}) == 1)


if __name__ == "__main__":
    trio.run(main)
