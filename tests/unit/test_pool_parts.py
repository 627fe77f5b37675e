"""The pool's parts alone: its books, fetcher, shielded calls and outage backoff (mock clock)."""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import pytest
import trio
import trio.testing

from trioqueue import BackendUnavailable, Claim, Job, MemoryBackend, Queue, open_worker_pool
from trioqueue._pool._books import Books
from trioqueue._pool._config import PoolConfig
from trioqueue._pool._fetch import Fetcher
from trioqueue._pool._heartbeat import Heartbeat
from trioqueue._pool._outage import OutageTracker
from trioqueue._pool._outcomes import Reporter
from trioqueue._retry import RetryPolicy


def claim(token: str) -> Claim:
    return Claim(job=Job(id=token, payload=None, attempt=1), token=token, ready_at=0.0)


class TestBooks:
    async def test_a_claim_is_held_until_forgotten_and_the_last_one_says_so(self):
        books = Books()
        emptied: list[int] = []
        books.emptied = lambda: emptied.append(len(books.held))
        a, b = claim("a"), claim("b")
        books.take([a, b], until=5.0)
        assert set(books.held) == {"a", "b"}
        books.forget(a)
        assert (set(books.held), emptied) == ({"b"}, [])
        books.forget(b)
        assert (books.held, books.lease_until, emptied) == ({}, {}, [0])

    async def test_a_lease_has_lapsed_from_its_time_on(self, autojump_clock):
        books = Books()
        books.take([claim("a")], until=5.0)
        assert not books.lapsed(claim("a"))
        await trio.sleep(5)
        assert books.lapsed(claim("a"))
        assert not books.lapsed(claim("unknown"))  # not taken here: nothing known of it

    async def test_forgetting_wakes_whoever_waits_for_a_claim_to_settle(self, nursery):
        books = Books()
        books.take([claim("a")], until=math.inf)
        woken = trio.Event()

        async def wait() -> None:
            await books.settled.park()
            woken.set()

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        books.forget(claim("a"))
        await woken.wait()

    def test_clear_empties_the_same_dict_and_keeps_what_was_unsettled(self):
        books = Books()
        held = books.held
        books.take([claim("a"), claim("b")], until=1.0)
        books.unsettled.add("a")
        assert [c.token for c in books.clear()] == ["a", "b"]
        assert held is books.held
        assert held == {}
        assert books.unsettled == {"a"}  # release_held tells interrupted handlers apart


def pool_config(**settings: float) -> PoolConfig:
    """A pool's settings: one worker, no prefetch, 30 s leases, unless *settings* say."""
    defaults: dict[str, float] = {
        "workers": 1, "prefetch": 0, "batch_size": 32, "lease": 30.0,
        "sweep_interval": 1.0, "poll_interval": 1.0, "io_timeout": 5.0,
    }  # fmt: skip
    values = defaults | settings
    return PoolConfig(
        retry=RetryPolicy(),
        handler_timeout=None,
        workers=int(values["workers"]),
        prefetch=int(values["prefetch"]),
        batch_size=int(values["batch_size"]),
        lease=values["lease"],
        sweep_interval=values["sweep_interval"],
        poll_interval=values["poll_interval"],
        io_timeout=values["io_timeout"],
    )


def reporter(io_timeout: float = 5.0) -> tuple[Reporter, OutageTracker]:
    backend = MemoryBackend()
    outage = OutageTracker(backend.metrics)
    return Reporter(backend, pool_config(io_timeout=io_timeout), Books(), outage), outage


class TestReporterTell:
    async def test_a_call_is_retried_through_an_outage_however_long(self, autojump_clock):
        tell, _ = reporter(io_timeout=5)
        tries: list[float] = []

        async def call() -> None:
            tries.append(trio.current_time())
            await trio.lowlevel.checkpoint()
            if trio.current_time() < 60:  # down for a minute: far past io_timeout
                raise BackendUnavailable("fake://db", "connection refused")

        assert await tell.tell("testing", call)
        assert tries[-1] >= 60
        assert all(b - a <= 5.0 + 1e-9 for a, b in itertools.pairwise(tries))

    async def test_a_call_refused_while_others_get_through_gives_up_after_io_timeout(
        self, autojump_clock
    ):
        tell, outage = reporter(io_timeout=5)

        async def call() -> None:
            await trio.sleep(0.01)
            outage.succeeded(trio.current_time())  # the pool's other calls land meanwhile
            raise BackendUnavailable("fake://db", "refused for this one")

        assert not await tell.tell("testing", call)
        assert 5 <= trio.current_time() < 15

    async def test_a_call_that_hangs_is_a_failed_try(self, autojump_clock):
        tell, _ = reporter(io_timeout=2)
        tries = 0

        async def call() -> None:
            nonlocal tries
            tries += 1
            if tries == 1:
                await trio.sleep_forever()  # no reply: the try ends after io_timeout
            await trio.lowlevel.checkpoint()

        assert await tell.tell("testing", call)
        assert tries == 2
        assert trio.current_time() >= 2

    async def test_a_shutdown_deadline_ends_a_call_waiting_out_an_outage(
        self, autojump_clock, nursery
    ):
        tell, _ = reporter(io_timeout=5)
        result: list[bool] = []

        async def down() -> None:
            await trio.lowlevel.checkpoint()
            raise BackendUnavailable("fake://db", "connection refused")

        async def run() -> None:
            result.append(await tell.tell("testing", down))

        nursery.start_soon(run)
        await trio.sleep(30)
        assert result == []  # still retrying: the outage outlasts io_timeout
        tell.limit(trio.current_time() + 3)
        await trio.sleep(4)
        assert result == [False]
        assert tell.deadline == pytest.approx(33)

    async def test_a_call_is_shielded_from_its_callers_cancellation(self, autojump_clock):
        tell, _ = reporter()
        landed = []

        async def call() -> None:
            await trio.sleep(1)
            landed.append(trio.current_time())

        with trio.move_on_after(0.5):
            await tell.tell("testing", call)
        assert landed == [1.0]  # it finished, though its caller was cancelled at 0.5 s


def fetcher(
    backend: MemoryBackend | object, *, workers: int = 1, prefetch: int = 0
) -> tuple[Fetcher, Books]:
    books = Books()
    outage = OutageTracker(backend.metrics)  # type: ignore[union-attr]
    config = pool_config(workers=workers, prefetch=prefetch)
    fetch = Fetcher(backend, config, books, outage)  # type: ignore[arg-type]
    books.emptied = fetch.emptied
    return fetch, books


class TestFetcher:
    @pytest.mark.parametrize(("workers", "prefetch"), [(1, 0), (2, 3)])
    async def test_it_claims_only_into_free_places(
        self, autojump_clock, nursery, workers: int, prefetch: int
    ):
        backend = MemoryBackend()
        queue = Queue(backend)
        for n in range(10):
            await queue.enqueue(n, id=f"j{n}")
        fetch, books = fetcher(backend, workers=workers, prefetch=prefetch)
        nursery.start_soon(fetch.run)
        await trio.testing.wait_all_tasks_blocked()
        # a place per worker and per prefetched job, no more, though 10 jobs are ready
        assert len(books.held) == workers + prefetch
        assert (await backend.stats()).gauges.inflight == workers + prefetch
        fetch.scope.cancel()

    async def test_a_place_is_claimed_into_again_only_once_the_worker_frees_it(
        self, autojump_clock, nursery
    ):
        backend = MemoryBackend()
        for n in range(3):
            await Queue(backend).enqueue(n, id=f"j{n}")
        fetch, books = fetcher(backend, workers=1, prefetch=0)
        nursery.start_soon(fetch.run)
        done = await fetch.jobs.receive()
        assert await backend.ack(done)
        books.forget(done)  # its outcome landed; its place is still the worker's
        await trio.testing.wait_all_tasks_blocked()
        assert books.held == {}  # nothing claimed meanwhile
        fetch.done()
        await trio.testing.wait_all_tasks_blocked()
        assert [claim.job.id for claim in books.held.values()] == ["j1"]
        fetch.scope.cancel()

    async def test_it_stops_at_the_drain_without_waiting_out_a_poll(self, autojump_clock):
        backend = MemoryBackend()
        fetch, _ = fetcher(backend)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch.run)
            await trio.sleep(0.25)  # waiting in a claim (polls last a second)
            fetch.mark_producer_finished()
        assert trio.current_time() == pytest.approx(0.25)  # at once, not at the poll's end

    async def test_a_lease_counts_from_when_the_claim_call_began(self, autojump_clock, nursery):
        memory = MemoryBackend()
        await Queue(memory).enqueue("a", id="a")

        class SlowReply:
            metrics = memory.metrics

            def __getattr__(self, name: str) -> object:
                return getattr(memory, name)

            async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
                claims = await memory.claim(max_jobs, lease=lease, block=block)
                await trio.sleep(2)  # the reply is on its way for 2 s
                return claims

        fetch, books = fetcher(SlowReply())
        nursery.start_soon(fetch.run)
        claimed = await fetch.jobs.receive()
        assert trio.current_time() == pytest.approx(2)
        assert books.lease_until[claimed.token] == pytest.approx(30)  # 0 + lease, not 2 + lease
        fetch.scope.cancel()


class TestOutageTracker:
    async def test_the_first_tries_come_a_quarter_second_apart_then_the_pauses_double(
        self, autojump_clock, caplog: pytest.LogCaptureFixture
    ):
        outage = OutageTracker(MemoryBackend().metrics, random.Random(1))
        error = BackendUnavailable("fake://db", "connection refused")
        pauses = []
        for _ in range(23):
            now = trio.current_time()
            next_try = outage.failed(error)
            pauses.append(next_try - now)
            await trio.sleep(next_try - now)
        nominal = [0.25] * 16 + [0.5, 1, 2, 4, 8, 15, 15]  # a failover ends within four s
        for pause, most in zip(pauses, nominal, strict=True):
            assert 0.8 * most <= pause <= most, pauses
        # one line for the outage's start, then one per doubled step: not 16 in 4 s
        lines = [r for r in caplog.records if "could not be reached" in r.getMessage()]
        assert len(lines) == 1 + 7


def test_a_heartbeat_knows_nothing_before_the_oldest_beat_it_kept():
    heartbeat = Heartbeat(keep=0.5)
    heartbeat._beats.extend(100.0 + 0.1 * n for n in range(heartbeat._beats.maxlen or 0))
    oldest, newest = heartbeat._beats[0], heartbeat._beats[-1]
    # a window reaching back past what is kept is no pause of that length
    assert heartbeat.stood_still(oldest - 300, newest) < 0.2
    assert heartbeat.stood_still(newest - 0.05, newest + 2) > 1.9  # no beat since: 2 s


class TestInline:
    """A pool on a memory backend claims and settles in its workers (``_pool/_inline.py``)."""

    def test_the_memory_backend_is_inline_and_a_wrapper_of_it_is_not(self):
        from trioqueue._backend_inline import inline_backend

        backend = MemoryBackend()

        class Wrapper:  # forwards every attribute, as the tests' fault wrappers do
            def __getattr__(self, name: str) -> object:
                return getattr(backend, name)

        assert inline_backend(backend) is backend
        assert inline_backend(Wrapper()) is None  # type: ignore[arg-type]

    async def test_ready_jobs_reach_the_workers_without_a_claim_call_or_an_outcome_call(self):
        backend = MemoryBackend()
        for n in range(20):
            await Queue(backend).enqueue(n, id=f"j{n}")
        calls: list[str] = []  # the async calls that claimed a job or recorded an outcome
        for name in ("claim", "ack", "retry_later", "dead_letter", "drop", "cancel_claim"):
            method = getattr(backend, name)

            async def counted(*args: Any, _name: str = name, _call: Any = method, **kw: Any) -> Any:
                result = await _call(*args, **kw)
                if result:  # a claim() that found nothing is a worker waiting for the drain
                    calls.append(_name)
                return result

            setattr(backend, name, counted)
        seen: list[str] = []

        async def handler(job: Job) -> None:
            seen.append(job.id)

        async with open_worker_pool(backend, handler, workers=4):
            pass
        assert sorted(seen) == sorted(f"j{n}" for n in range(20))
        assert calls == []  # every claim and outcome went through the synchronous calls
        assert (await backend.stats()).succeeded == 20
