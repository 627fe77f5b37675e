"""A pool never starts a claim whose lease ran out while it waited (mock clock)."""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Any

import trio

import trioqueue
from trioqueue import BackendUnavailable, Queue

if TYPE_CHECKING:
    import pytest


class RenewalsFail:
    """A MemoryBackend whose renewals fail (as in a pause, the pool cannot renew)."""

    def __init__(self, inner: trioqueue.MemoryBackend) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def renew(self, claims: Any, *, lease: float) -> None:
        await trio.lowlevel.checkpoint()
        raise BackendUnavailable("fake://db", "renewal refused")


async def test_a_prefetched_claim_whose_lease_ran_out_is_given_back_not_started(
    autojump_clock, caplog: pytest.LogCaptureFixture
):
    memory = trioqueue.MemoryBackend()
    runs: collections.Counter[str] = collections.Counter()

    async def handler(job: trioqueue.Job) -> None:
        runs[job.id] += 1
        if job.id == "long" and runs[job.id] == 1:
            await trio.sleep(10)  # past every lease: the prefetched claim waits that long

    async with trioqueue.open_worker_pool(
        RenewalsFail(memory),  # type: ignore[arg-type]
        handler,
        workers=1,
        prefetch=1,
        lease=3,
    ):
        await Queue(memory).enqueue("long", id="long")
        await Queue(memory).enqueue("next", id="next")
        await trio.sleep(5)
        # another pool's sweeper: both leases ran out at 3 s; it puts both jobs back
        assert (await memory.sweep()).recovered == 2
    # the prefetched claim of "next" lapsed at 3 s and was recovered: it runs once, from
    # the new claim, not also from the one that lapsed
    assert runs["next"] == 1
    lapsed = [r for r in caplog.records if "lease ran out before it started" in r.getMessage()]
    assert [r.levelno for r in lapsed] == [logging.WARNING]
    assert "job next:" in lapsed[0].getMessage()
    assert memory.metrics.snapshot().stale >= 1
    assert (await memory.stats()).conserved
