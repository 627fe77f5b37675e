"""Redis under real time and real faults: killed workers, long handlers, restarts.

These run on the server's clock (no test clock), with short ``min_idle`` values.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import coredis
import pytest
import trio
import trio.testing
from coredis.tokens import PureToken

import trioqueue
from trioqueue import Queue

from .redis_server import RedisServer, find_server_binary

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")

TARGET = Path(__file__).with_name("kill_target.py")


def queue_name() -> str:
    return "{c-" + uuid.uuid4().hex[:12] + "}"


@pytest.fixture
def own_server():
    """A server of the test's own, with appendonly on (fsync always): it may be restarted."""
    server = RedisServer(find_server_binary(), appendonly=True)
    server.start()
    yield server
    server.close()


async def start_and_kill_mid_handler(url: str, name: str, min_idle: float, *mode: str) -> float:
    """Run kill_target.py until its handler starts on ``victim``, SIGKILL it; the time then."""
    command = [sys.executable, str(TARGET), url, name, str(min_idle), *mode]
    # a plain Popen handle, to SIGKILL it; starting it takes milliseconds
    worker = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # noqa: ASYNC220
    try:
        assert worker.stdout is not None
        line = await trio.to_thread.run_sync(worker.stdout.readline)
        assert line.strip() == "started victim"
    finally:
        worker.kill()  # SIGKILL mid-handler: no cleanup runs
        await trio.to_thread.run_sync(worker.wait)
        if worker.stdout is not None:
            worker.stdout.close()
    return trio.current_time()


async def kill_restart_and_read(server: RedisServer, read: Callable[[], Awaitable[T]]) -> T:
    """SIGKILL *server* (no clean save), start it again from its append-only file,
    and return what *read* answers once Redis does (the first call after a restart
    finds the link broken)."""
    await trio.to_thread.run_sync(partial(server.stop, kill=True))
    await trio.to_thread.run_sync(server.start)
    with trio.fail_after(10):
        while True:
            try:
                return await read()
            except trioqueue.BackendUnavailable:
                await trio.sleep(0.1)


async def test_a_job_of_a_killed_worker_is_recovered_within_min_idle_and_a_sweep(
    redis_server: RedisServer,
):
    name, min_idle, sweep = queue_name(), 1.0, 0.2
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=min_idle) as backend:
        await Queue(backend).enqueue({"n": 1}, id="victim")
        killed_at = await start_and_kill_mid_handler(redis_server.url, name, min_idle)
        runs: list[float] = []

        async def handler(job: trioqueue.Job) -> None:
            runs.append(trio.current_time() - killed_at)

        async with trioqueue.open_worker_pool(
            backend, handler, sweep_interval=sweep, poll_interval=0.2
        ):
            pass
        assert len(runs) == 1
        assert runs[0] <= min_idle + sweep + 1.0  # one second for the process to start
        stats = await backend.stats()
        assert (stats.recovered, stats.succeeded, stats.gauges.held) == (1, 1, 0)


async def test_a_job_killed_mid_backoff_waits_out_the_rest_of_it(redis_server: RedisServer):
    """SIGKILL while the pool sleeps out a 4 s backoff: the lease runs out after
    min_idle (1 s) and the job is recovered, but its next attempt still waits for
    the due time the failed attempt recorded on the server."""
    name, min_idle, sweep = queue_name(), 1.0, 0.2
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=min_idle) as backend:
        await Queue(backend).enqueue({"n": 1}, id="victim")
        command = [sys.executable, str(TARGET), redis_server.url, name, str(min_idle), "backoff"]
        worker = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # noqa: ASYNC220
        try:
            assert worker.stdout is not None
            line = await trio.to_thread.run_sync(worker.stdout.readline)
            assert line.strip() == "started victim"
            # the failed attempt's outcome lands, with its due time (another process
            # writes it: nothing here to wait on but the record)
            with trio.fail_after(10):
                while (record := await backend.status("victim")) is None or (  # noqa: ASYNC110
                    record.state is not trioqueue.JobState.FAILED_RETRY
                ):
                    await trio.sleep(0.01)
        finally:
            worker.kill()  # SIGKILL mid-backoff: the sleeper's requeue never comes
            await trio.to_thread.run_sync(worker.wait)
            if worker.stdout is not None:
                worker.stdout.close()
        due_at = record.due_at
        assert due_at is not None
        assert due_at - record.updated_at == pytest.approx(4.0, abs=0.01)
        starts: list[float] = []

        async def handler(job: trioqueue.Job) -> None:
            starts.append(time.time())

        async with trioqueue.open_worker_pool(
            backend, handler, sweep_interval=sweep, poll_interval=0.2
        ):
            pass  # drains: the recovered job waits among the delayed ones until due
        assert len(starts) == 1
        # the server's clock and ours are one machine's: not early, and on time
        assert due_at - 0.01 <= starts[0] < due_at + 0.5
        stats = await backend.stats()
        assert (stats.recovered, stats.succeeded, stats.retries, stats.gauges.held) == (1, 1, 1, 0)
        record = await backend.status("victim")
        assert record is not None
        assert (record.state, record.attempts) == (trioqueue.JobState.COMPLETED, 2)


async def test_a_simple_queue_never_reruns_a_killed_workers_job(redis_server: RedisServer):
    name, min_idle, sweep = queue_name(), 1.0, 0.2
    async with trioqueue.RedisBackend(
        redis_server.url, queue=name, min_idle=min_idle, reliable=False
    ) as backend:
        await Queue(backend).enqueue({"n": 1}, id="victim")
        killed_at = await start_and_kill_mid_handler(redis_server.url, name, min_idle, "simple")
        runs: list[str] = []

        async def handler(job: trioqueue.Job) -> None:
            runs.append(job.id)

        async with trioqueue.open_worker_pool(
            backend, handler, sweep_interval=sweep, poll_interval=0.2
        ):
            pass  # drains once the abandoned claim has become a dead letter
        assert runs == []  # at most once
        assert trio.current_time() - killed_at <= min_idle + sweep + 1.0
        [dead] = await backend.dead_letters()
        assert dead.id == "victim"
        assert "its worker stopped" in (dead.reason or "")
        stats = await backend.stats()
        assert (stats.dead_lettered, stats.recovered, stats.gauges.held) == (1, 0, 0)
        assert stats.conserved


async def test_a_handler_running_ten_times_min_idle_runs_once(redis_server: RedisServer):
    name, min_idle = queue_name(), 0.3
    runs: list[str] = []

    async def slow(job: trioqueue.Job) -> None:
        runs.append(job.id)
        await trio.sleep(10 * min_idle)

    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=min_idle) as backend:
        async with (  # two pools competing, each sweeping often
            trioqueue.open_worker_pool(backend, slow, sweep_interval=0.05, poll_interval=0.1),
            trioqueue.open_worker_pool(backend, slow, sweep_interval=0.05, poll_interval=0.1),
        ):
            for i in range(4):
                await Queue(backend).enqueue(i, id=str(i))
        assert sorted(runs) == ["0", "1", "2", "3"]
        assert (await backend.stats()).recovered == 0


async def test_a_redis_restart_mid_run_loses_no_job(own_server: RedisServer):
    name, jobs = queue_name(), 200
    done: list[str] = []
    a_quarter_done = trio.Event()

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(0.005)
        done.append(job.id)
        if len(done) >= jobs // 4:
            a_quarter_done.set()

    async with trioqueue.RedisBackend(own_server.url, queue=name, min_idle=2) as backend:
        queue = Queue(backend)
        for i in range(jobs):
            await queue.enqueue(i, id=str(i))
        async with trioqueue.open_worker_pool(
            backend, handler, workers=8, sweep_interval=0.2, poll_interval=0.2
        ) as pool:
            await a_quarter_done.wait()
            await trio.to_thread.run_sync(own_server.stop)  # down mid-run
            done_at_stop = len(done)
            await trio.sleep(1.5)  # long enough for the pool to see the outage
            await trio.to_thread.run_sync(own_server.start)
            pool.mark_producer_finished()
            with trio.fail_after(60):
                await pool.wait_stopped()
        assert done_at_stop < jobs  # the restart came mid-run
        assert backend.metrics.snapshot().backend_errors > 0  # it did notice the outage
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held, stats.dead_lettered) == (jobs, 0, 0)
        assert set(done) == {str(i) for i in range(jobs)}  # at least once each


async def test_a_pool_started_while_redis_is_down_waits_and_then_works(
    own_server: RedisServer, caplog: pytest.LogCaptureFixture
):
    name = queue_name()
    own_server.stop()
    seen: list[str] = []

    async def handler(job: trioqueue.Job) -> None:
        seen.append(job.id)

    async with trioqueue.RedisBackend(own_server.url, queue=name, min_idle=2) as backend:
        async with trioqueue.open_worker_pool(backend, handler, poll_interval=0.2) as pool:
            # the fetcher tries, fails and says so (within the connect timeout, 2 s)
            with trio.fail_after(10):
                while "could not be reached" not in caplog.text:  # noqa: ASYNC110 - a log
                    await trio.sleep(0.01)
            await trio.to_thread.run_sync(own_server.start)
            await Queue(backend).enqueue("late", id="late")
            pool.mark_producer_finished()
            with trio.fail_after(30):
                await pool.wait_stopped()
        assert seen == ["late"]


async def test_dropped_connections_mid_run_lose_no_job(redis_server: RedisServer):
    name, jobs = queue_name(), 200
    done: list[str] = []
    progress = trio.Condition()

    async def handler(job: trioqueue.Job) -> None:
        await trio.sleep(0.005)
        done.append(job.id)
        async with progress:
            progress.notify_all()

    async def drop_every_connection_but_mine(client: coredis.Redis[bytes]) -> int:
        return int(await client.client_kill(type_=PureToken.NORMAL, skipme=True))

    async with (
        trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=1) as backend,
        coredis.Redis.from_url(redis_server.url) as admin,
    ):
        queue = Queue(backend)
        for i in range(jobs):
            await queue.enqueue(i, id=str(i))
        killed = 0
        async with trioqueue.open_worker_pool(
            backend, handler, workers=8, sweep_interval=0.2, poll_interval=0.2
        ) as pool:
            for fraction in (4, 2):  # drop them twice: a quarter and half of the way
                async with progress:
                    while len(done) < jobs // fraction:
                        await progress.wait()
                killed += await drop_every_connection_but_mine(admin)
            pool.mark_producer_finished()
            with trio.fail_after(60):
                await pool.wait_stopped()
        assert killed > 0
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held, stats.dead_lettered) == (jobs, 0, 0)
        assert set(done) == {str(i) for i in range(jobs)}  # at least once each
        assert stats.conserved


async def test_a_worker_killed_while_its_queue_is_paused_loses_nothing(redis_server: RedisServer):
    """Paused, the killed worker's job is recovered but not run; resumed, every job runs once."""
    name, min_idle, sweep = queue_name(), 1.0, 0.2
    async with trioqueue.RedisBackend(redis_server.url, queue=name, min_idle=min_idle) as backend:
        queue = Queue(backend)
        await queue.enqueue({"n": 0}, id="victim")
        await queue.enqueue_many(
            [{"n": n} for n in range(1, 6)], ids=[f"j{n}" for n in range(1, 6)]
        )
        killed_at = await start_and_kill_mid_handler(redis_server.url, name, min_idle)
        await queue.pause()
        runs: list[str] = []

        async def handler(job: trioqueue.Job) -> None:
            runs.append(job.id)

        async with trioqueue.open_worker_pool(
            backend, handler, sweep_interval=sweep, poll_interval=0.2
        ) as pool:
            # past the victim's lease and a sweep: recovered onto the queue, not run
            await trio.sleep_until(killed_at + min_idle + 4 * sweep + 0.5)
            assert runs == []
            assert (await backend.stats()).recovered == 1
            await queue.resume()
            pool.mark_producer_finished()
            await pool.wait_stopped()
        assert sorted(runs) == ["j1", "j2", "j3", "j4", "j5", "victim"]
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held, stats.dead_lettered) == (6, 0, 0)


async def test_a_killed_worker_and_a_redis_restart_leave_every_chain_whole(
    own_server: RedisServer,
):
    """A chain's parent held by a killed worker runs again, then its followers, in order.

    The worker dies holding the first job of a chain; the server then stops and
    restarts from its append-only file mid-run. Each job still runs after the one
    before it completed, and every chain finishes, nothing lost.
    """
    name, chains, length, min_idle = queue_name(), 30, 4, 1.0
    async with trioqueue.RedisBackend(own_server.url, queue=name, min_idle=min_idle) as backend:
        queue = Queue(backend)
        await queue.enqueue_chain(["v", "w"], ids=["victim", "victim:after"])
        await start_and_kill_mid_handler(own_server.url, name, min_idle)
        record = await queue.status("victim:after")
        assert record is not None
        assert record.state is trioqueue.JobState.DEFERRED
        for c in range(chains):
            await queue.enqueue_chain(
                list(range(length)), ids=[f"c{c}:{step}" for step in range(length)]
            )
        started: dict[str, int] = {}
        completed: set[str] = set()
        order_broken: list[str] = []
        a_quarter_done = trio.Event()

        async def handler(job: trioqueue.Job) -> None:
            chain, _, step = job.id.partition(":")
            before = f"{chain}:{int(step) - 1}" if step.isdigit() and step != "0" else None
            if job.id == "victim:after":
                before = "victim"
            if before is not None and before not in completed:
                order_broken.append(job.id)
            started[job.id] = started.get(job.id, 0) + 1
            await trio.sleep(0.01)
            completed.add(job.id)
            if len(completed) >= chains * length // 4:
                a_quarter_done.set()

        async with trioqueue.open_worker_pool(
            backend, handler, workers=8, sweep_interval=0.2, poll_interval=0.2
        ) as pool:
            await a_quarter_done.wait()
            await trio.to_thread.run_sync(own_server.stop)  # down mid-run
            await trio.sleep(1.5)
            await trio.to_thread.run_sync(own_server.start)
            pool.mark_producer_finished()
            with trio.fail_after(60):
                await pool.wait_stopped()
        expected = {f"c{c}:{step}" for c in range(chains) for step in range(length)}
        assert completed == expected | {"victim", "victim:after"}
        assert order_broken == []
        stats = await backend.stats()
        assert (stats.gauges.held, stats.gauges.deferred, stats.dead_lettered) == (0, 0, 0)
        assert stats.recovered >= 1  # the killed worker's job came back
        assert stats.conserved


async def test_a_unique_key_stays_held_through_a_killed_worker_and_a_restart(
    own_server: RedisServer,
):
    """A keyed job whose worker died keeps its key until it ends, and a debounce survives.

    The key is held while the killed worker's claim waits for recovery, so the same
    key again finds that job; a debounced job replaced just before Redis restarts
    from its append-only file stays replaced, and its replacement runs once.
    """
    name, min_idle = queue_name(), 1.0
    async with trioqueue.RedisBackend(own_server.url, queue=name, min_idle=min_idle) as backend:
        queue = Queue(backend)
        await queue.enqueue("v", id="victim", unique_key="report:1")
        await start_and_kill_mid_handler(own_server.url, name, min_idle)
        found = await queue.enqueue("again", id="again", unique_key="report:1")
        assert (found.id, found.deduplicated) == ("victim", True)
        await queue.enqueue(1, id="save-1", unique_key="autosave", debounce=3)
        await queue.enqueue(2, id="save-2", unique_key="autosave", debounce=3)
        record = await kill_restart_and_read(own_server, partial(queue.status, "save-1"))
        assert record is not None
        assert record.state is trioqueue.JobState.CANCELLED
        ran: list[str] = []
        both_ran = trio.Event()

        async def handler(job: trioqueue.Job) -> None:
            ran.append(job.id)
            if len(ran) == 2:
                both_ran.set()

        async with trioqueue.open_worker_pool(
            backend, handler, sweep_interval=0.2, poll_interval=0.2
        ) as pool:
            with trio.fail_after(30):
                await both_ran.wait()
            pool.mark_producer_finished()
        assert sorted(ran) == ["save-2", "victim"]
        fresh = await queue.enqueue("next", id="next", unique_key="report:1")
        assert (fresh.id, fresh.deduplicated) == ("next", False)
        stats = await backend.stats()
        assert stats.recovered == 1
        assert stats.conserved


async def test_rate_limits_hold_through_a_killed_worker_and_a_restart(own_server: RedisServer):
    """The limits and each key's times live in Redis: a killed worker and a restart
    from the append-only file lose no job, run none twice, and break no limit.

    Times are the pool's (handler starts), the limit keeps the server's: the
    check allows a quarter of a second between the two (unlimited, the nine jobs
    would start within milliseconds).
    """
    name, min_idle = queue_name(), 1.0
    async with trioqueue.RedisBackend(own_server.url, queue=name, min_idle=min_idle) as backend:
        queue = Queue(backend)
        await queue.set_rate_limits(
            queue=trioqueue.RateLimit(20), per_key=trioqueue.RateLimit(1, per=0.5)
        )
        await queue.enqueue({"key": "a"}, id="victim", rate_key="a")
        await queue.enqueue_many([{"key": "a"}] * 5, ids=[f"a{n}" for n in range(5)], rate_key="a")
        await queue.enqueue_many([{"key": "b"}] * 3, ids=[f"b{n}" for n in range(3)], rate_key="b")
        await start_and_kill_mid_handler(own_server.url, name, min_idle)
        limits = await kill_restart_and_read(own_server, queue.rate_limits)
        assert limits.per_key == trioqueue.RateLimit(1, per=0.5)
        starts: dict[str, list[float]] = {"a": [], "b": []}
        ran: list[str] = []
        all_ran = trio.Event()

        async def handler(job: trioqueue.Job) -> None:
            starts[job.payload["key"]].append(trio.current_time())
            ran.append(job.id)
            if len(ran) == 9:
                all_ran.set()

        async with trioqueue.open_worker_pool(
            backend, handler, workers=10, sweep_interval=0.2, poll_interval=0.2
        ) as pool:
            with trio.fail_after(30):
                await all_ran.wait()
            pool.mark_producer_finished()
        assert sorted(ran) == sorted(["victim", *(f"a{n}" for n in range(5)), "b0", "b1", "b2"])
        for times in starts.values():
            gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
            assert min(gaps) >= 0.5 - 0.25, times
        stats = await backend.stats()
        assert (stats.succeeded, stats.gauges.held, stats.dead_lettered) == (9, 0, 0)
        assert stats.conserved
