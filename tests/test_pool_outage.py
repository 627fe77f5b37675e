"""A pool through a backend outage (memory backend behind a fake outage, mock clock).

The pool's tasks share one view of the outage: one log line per backoff step,
the sweeper skips its periods while the outage lasts, one line when the backend
is back, and ``give_up_after`` ends the pool at the right time.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
import trio
import trio.lowlevel

import trioqueue
from trioqueue import BackendUnavailable, Queue

from .fake_outage import Outages


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name.startswith("trioqueue") and r.levelno >= logging.WARNING
    ]


async def test_a_60_s_outage_logs_one_line_per_backoff_step_and_one_when_it_ends(
    autojump_clock, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="trioqueue")
    memory = trioqueue.MemoryBackend()
    backend = Outages(memory, (5, 65))
    done: list[float] = []

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(200)  # holds its claim through the outage: renewal fails too
        done.append(trio.current_time())

    # a lease longer than the outage: renewal fails once (at 40) and then keeps the claim
    pool_options: dict[str, Any] = {"seed": 1, "lease": 120}
    async with trioqueue.open_worker_pool(backend, handler, **pool_options) as pool:  # type: ignore[arg-type]
        await Queue(memory).enqueue("p", id="j")
        await trio.sleep(100)
        assert pool.held == 1
    assert done == [200]
    # the sweeper renews what the pool holds before it sweeps: its tries fail at the renewal
    assert {name for name, _, failed in backend.calls if failed} >= {"claim", "renew"}

    lines = outage_lines(caplog)
    # one per backoff step (doubling from 0.5 s to 15 s), not two a second
    assert 5 <= len(lines) <= 12, [r.getMessage() for r in lines]
    for record in lines:
        message = record.getMessage()
        assert re.fullmatch(
            r"the backend at fake://db could not be reached since \d\d:\d\d:\d\d "
            r"\(connection refused\); next try in \d+\.\d s",
            message,
        ), message
        assert "retry this call" not in message
    # the steps grow: each pause at least as long as the one before, up to the cap
    pauses = [float(r.getMessage().rsplit(" ", 2)[1]) for r in lines]
    assert max(pauses) <= 15.0
    assert pauses[-1] > 4 * pauses[0]
    # the sweeper skipped its periods while the outage lasted (60 periods of 1 s): its
    # tries and the renewal task's two (every 40 s) are all the renewals that failed
    assert len(backend.failures("renew")) + len(backend.failures("sweep")) <= 14
    # every failed call is counted
    assert memory.metrics.backend_errors == len(backend.failures())

    back = [r for r in caplog.records if "reachable again" in r.getMessage()]
    assert len(back) == 1
    assert back[0].levelno == logging.INFO
    first_failure = backend.failures()[0]
    back_at = min(t for t in backend.returned if t >= 65)  # the first call that came back
    assert first_failure == 5
    assert back[0].getMessage() == (
        f"the backend at fake://db is reachable again after {back_at - 5:.1f} s"
    )


async def test_give_up_after_ends_the_pool_with_backend_unavailable(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Outages(memory, (0, float("inf")))

    async def handler(job: trioqueue.Job) -> None:
        raise AssertionError("never claimed")

    with pytest.raises(BackendUnavailable) as info:
        async with trioqueue.open_worker_pool(backend, handler, give_up_after=30):  # type: ignore[arg-type]
            await trio.sleep_forever()
    assert trio.current_time() == 30  # the first failed call was at 0
    assert info.value.where == "fake://db"
    assert info.value.detail == "connection refused"
    assert "gave up after 30.0 s" in str(info.value)
    assert "give_up_after=30" in str(info.value)


async def test_give_up_after_counts_from_the_last_success(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Outages(memory, (0, 20), (100, float("inf")))

    async def handler(job: trioqueue.Job) -> None:
        pass

    with pytest.raises(BackendUnavailable):
        async with trioqueue.open_worker_pool(backend, handler, give_up_after=30):  # type: ignore[arg-type]
            await trio.sleep_forever()
    # the 20 s outage was forgiven; the second one began at its first failed call
    began = backend.failures()[len([t for t in backend.failures() if t < 100])]
    assert 100 <= began < 102
    assert trio.current_time() == began + 30


@pytest.mark.parametrize("seed", range(5))
async def test_give_up_after_makes_its_last_try_when_it_has_passed(autojump_clock, seed):
    memory = trioqueue.MemoryBackend()
    backend = Outages(memory, (0, 29.9))  # back just before the limit, between two tries

    async def handler(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(backend, handler, give_up_after=30, seed=seed):  # type: ignore[arg-type]
        await trio.sleep(100)
    assert 30 in [t for _, t, failed in backend.calls if not failed]


async def test_a_cancelled_claim_does_not_end_an_outage(
    autojump_clock, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="trioqueue")
    memory = trioqueue.MemoryBackend()
    backend = Outages(memory, (0, float("inf")), hang=True)

    async def handler(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(backend, handler) as pool:  # type: ignore[arg-type]
        await trio.sleep(10)
        assert backend.failures("sweep")  # the outage is known
        pool.mark_producer_finished()  # cancels the claim's wait for work
        await trio.sleep(10)
        await pool.shutdown(0)
    assert not [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]


def test_give_up_after_is_checked():
    with pytest.raises(trioqueue.ConfigurationError, match="give_up_after"):
        trio.run(_open_with, -1.0)


async def _open_with(give_up_after: float) -> None:
    async def handler(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(
        trioqueue.MemoryBackend(), handler, give_up_after=give_up_after
    ):
        pass


async def test_wait_backend_reached_returns_after_the_first_successful_call(autojump_clock):
    memory = trioqueue.MemoryBackend()
    backend = Outages(memory, (0, 10))

    async def handler(job: trioqueue.Job) -> None:
        pass

    async with trioqueue.open_worker_pool(backend, handler) as pool:  # type: ignore[arg-type]
        await pool.wait_backend_reached()
        reached = trio.current_time()
        assert reached == backend.returned[0]
        assert 10 <= reached <= 10 + 15
        await pool.wait_backend_reached()  # returns at once from then on
        assert trio.current_time() == reached


def test_backend_unavailable_keeps_the_cause_apart_from_the_advice():
    exc = BackendUnavailable("redis://h:1/0", "Connection refused")
    assert exc.detail == "Connection refused"
    assert exc.where == "redis://h:1/0"
    assert "retry this call" in str(exc)  # the advice stays, for library callers
