"""The pool's parts on their own: its books of claims and its shielded calls (mock clock)."""

from __future__ import annotations

import itertools
import math

import pytest
import trio
import trio.testing

from trioqueue import BackendUnavailable, Claim, Job, MemoryBackend
from trioqueue._outage import OutageTracker
from trioqueue._pool_books import Books
from trioqueue._pool_config import PoolConfig
from trioqueue._pool_outcomes import Reporter
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


def reporter(io_timeout: float = 5.0) -> tuple[Reporter, OutageTracker]:
    backend = MemoryBackend()
    config = PoolConfig(
        workers=1,
        retry=RetryPolicy(),
        handler_timeout=None,
        prefetch=0,
        batch_size=1,
        lease=30.0,
        sweep_interval=1.0,
        poll_interval=1.0,
        io_timeout=io_timeout,
    )
    outage = OutageTracker(backend.metrics)
    return Reporter(backend, config, Books(), outage), outage


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
