"""The worker's metrics in the Prometheus text format, served by prometheus_client.

A Trio task refreshes a snapshot of the queue's stats every second; scrapes,
which prometheus_client answers from a thread of its own, read that snapshot
and never wait on Redis. Counters are the queue's shared totals (every worker
of the queue reports the same), except ``backend_errors``, which is this
process's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import trio
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.registry import Collector, CollectorRegistry

from ._cli_args import UsageError
from ._exceptions import BackendUnavailable
from ._metrics import COUNTER_NAMES

if TYPE_CHECKING:
    from collections.abc import Iterator

    from prometheus_client.metrics_core import Metric

    from ._backend import Backend
    from ._metrics import MetricsSnapshot

__all__ = ["serve_metrics"]

logger = logging.getLogger("trioqueue.metrics")

GAUGE_HELP: Final = {
    "queue_depth": "Jobs on the ready queue.",
    "backlog": "Jobs waiting for a worker: the ready queue plus jobs stored for lack of room.",
    "inflight": "Jobs claimed by a worker and not waiting to retry.",
    "retry_waiting": "Claimed jobs waiting out a retry backoff.",
    "dead": "Dead letters.",
}
_REFRESH: Final = 1.0  # seconds between two reads of the queue's stats


class _SnapshotCollector(Collector):
    def __init__(self, queue: str) -> None:
        self._queue = queue
        self.snapshot: MetricsSnapshot | None = None

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        for name in COUNTER_NAMES:
            counter = CounterMetricFamily(
                f"trioqueue_{name}", f"trioqueue counter {name}.", labels=["queue"]
            )
            counter.add_metric([self._queue], getattr(snap, name))
            yield counter
        for name, help_text in GAUGE_HELP.items():
            gauge = GaugeMetricFamily(f"trioqueue_{name}", help_text, labels=["queue"])
            gauge.add_metric([self._queue], getattr(snap.gauges, name))
            yield gauge


async def serve_metrics(
    backend: Backend,
    queue: str,
    port: int,
    addr: str = "127.0.0.1",
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``/metrics`` on *addr*, *port* until cancelled, refreshing the stats every second.

    Started (``nursery.start``) once the port is bound. The default address is
    the loopback one, for this host only; give ``0.0.0.0``, ``::`` or an
    interface's address to let other hosts scrape it.

    Raises:
        UsageError: The address and port cannot be bound (in use, not allowed,
            or not an address of this host).
    """
    collector = _SnapshotCollector(queue)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise UsageError(
            f"--metrics-port {port}: cannot serve metrics there on {addr} "
            f"({exc.strerror or exc}); choose a free port, and for --metrics-addr an "
            "address of this host"
        ) from None
    host = f"[{addr}]" if ":" in addr else addr
    logger.info("metrics on http://%s:%d/metrics", host, port)
    task_status.started()
    try:
        while True:
            try:
                collector.snapshot = await backend.stats()
            except BackendUnavailable as exc:
                logger.warning("metrics not refreshed: %s", exc)
            await trio.sleep(_REFRESH)
    finally:
        with trio.CancelScope(shield=True):  # stop serving even when cancelled
            await trio.to_thread.run_sync(server.shutdown)
        server.server_close()
        thread.join()
