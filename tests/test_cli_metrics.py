"""The worker's /metrics across processes: per-process counters add up, queue gauges do not.

Two ``trioqueue worker`` subprocesses share one Redis queue; each serves its own
/metrics, read with prometheus_client's parser as Prometheus would read it.
"""

from __future__ import annotations

import time
import urllib.request
from typing import TYPE_CHECKING

from prometheus_client.parser import text_string_to_metric_families

from . import test_cli_redis
from .test_cli_redis import TIMEOUT, Worker, free_port

# the same fixtures as the other CLI tests on Redis
target = test_cli_redis.target
workers = test_cli_redis.workers

if TYPE_CHECKING:
    from collections.abc import Callable


def scrape(port: int) -> dict[str, float]:
    """Every sample of the worker's /metrics, by name; {} while it is not listening yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return {}
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape_until(
    ports: list[int], holds: Callable[[list[dict[str, float]]], bool]
) -> list[dict[str, float]]:
    """Scrape every port until *holds* is true of the scrapes; fail after `TIMEOUT`."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        scrapes = [scrape(port) for port in ports]
        if holds(scrapes):
            return scrapes
        assert time.monotonic() < deadline, scrapes
        time.sleep(0.1)


SUCCEEDED = "trioqueue_worker_succeeded_total"
QUEUE_SUCCEEDED = "trioqueue_queue_succeeded"


def test_per_process_counters_add_up_and_the_queue_gauges_are_the_same_everywhere(target, workers):
    jobs = 12
    ports = [free_port(), free_port()]
    for port in ports:
        # half a second per job, four at a time: both workers get some of the jobs
        worker = Worker(target, "cli_handlers:brief", "--metrics-port", str(port))
        workers.append(worker)
    for worker in workers:
        worker.wait_for(worker.err, "worker on reliable queue")
    target.enqueue_lines(jobs)
    ran = [line for worker in workers for line in worker.wait_for(worker.out, "ran", 1)]
    assert len(ran) == 2  # each worker ran a job

    def done(scrapes: list[dict[str, float]]) -> bool:
        return sum(s.get(SUCCEEDED, 0) for s in scrapes) == jobs and all(
            s.get(QUEUE_SUCCEEDED) == jobs for s in scrapes
        )

    scrapes = scrape_until(ports, done)
    assert all(0 < s[SUCCEEDED] < jobs for s in scrapes)  # each did only its share
    for s in scrapes:
        assert s["trioqueue_queue_enqueued"] == jobs
        assert s["trioqueue_queue_processed"] == jobs
        assert s["trioqueue_queue_backlog"] == 0
        assert s["trioqueue_worker_handler_seconds_count"] == s[SUCCEEDED]
        assert s["trioqueue_worker_handler_seconds_sum"] >= 0.5 * s[SUCCEEDED]  # brief: 0.5 s
    assert sum(s["trioqueue_worker_processed_total"] for s in scrapes) == jobs
