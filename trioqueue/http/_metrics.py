"""``GET /metrics``: the worker's Prometheus metrics, served by the HTTP service itself.

The same names as ``trioqueue worker --metrics-port`` (docs/metrics.md): this
process's counters and latency histograms, and the queue's shared figures read
from the backend at each scrape (left out while it cannot be read).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry
from starlette.responses import Response

from .._exceptions import BackendUnavailable
from .._prometheus import MetricsCollector

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from .._backend import Backend
    from .._metrics import MetricsSnapshot

__all__ = ["metrics_endpoint"]


def metrics_endpoint(backend: Backend, name: str) -> Callable[[Request], Awaitable[Response]]:
    """The ``/metrics`` handler for *backend*, labelled ``queue=name``."""
    collector = MetricsCollector(name, backend.metrics)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)

    async def metrics(request: Request) -> Response:
        shared: MetricsSnapshot | None = None
        # unreadable: this process's own figures are served all the same
        with contextlib.suppress(BackendUnavailable):
            shared = await backend.stats()
        collector.refresh(shared)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return metrics
