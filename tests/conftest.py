"""Shared fixtures: the backend factory every contract test runs on, and helpers."""

from __future__ import annotations

import functools
import inspect
import math
import os
import signal
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import settings

import trioqueue

from .redis_cluster import RedisCluster, started_cluster
from .redis_server import RedisServer, find_server_binary

# A run started in the background (`nox -s tests &`, a CI script, nohup) may inherit
# SIGINT ignored, and so would every process the tests start: the tests that
# interrupt one would wait in vain. A handler is reset to the default by exec (an
# ignored signal is not), so catching it here gives those processes their Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

settings.register_profile("default", deadline=None, max_examples=100)
settings.register_profile("ci", deadline=None, max_examples=200, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Every backend and mode runs the whole contract suite.
BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("redis", id="redis"),
    pytest.param("redis-simple", id="redis-simple"),
    pytest.param("redis-cluster", id="redis-cluster"),
    pytest.param("redis-stream", id="redis-stream"),
    # production's time: the scripts read the server's clock, Trio's is the real one
    # (tests marked server_clock: those that wait no more than a moment)
    pytest.param("redis-server-clock", id="redis-server-clock"),
]

# Real seconds every task must stay blocked before a mock clock jumps: a Redis reply
# in flight leaves every task blocked too, and must not count as idle.
JUMP_AFTER = {
    "memory": 0.0,
    "redis": 0.02,
    "redis-simple": 0.02,
    "redis-cluster": 0.02,
    "redis-stream": 0.02,
}
SERVER_CLOCK = "redis-server-clock"

MakeBackend = Callable[..., Awaitable[trioqueue.Backend]]

# Real seconds any one async test may take. A test that waits for ever (on the queue,
# the pool, a reply) fails after this instead of hanging the run; pytest-timeout (in
# pyproject.toml) stops the whole run later still if a test cannot even be cancelled.
TEST_TIME_LIMIT = 60.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--alone",
        choices=("include", "exclude", "only"),
        default="include",
        help="the tests marked `alone` (timing targets that must not share the CPU): run them "
        "with the others (include, the default), leave them out (exclude: a run beside "
        "other test processes) or run only them (only: the run after that)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip): the tests marked alone, or the others, for ``--alone=exclude|only``;
    the redis-cluster variant of the contract tests marked ``not_on_cluster``, the
    redis-stream variant of those marked ``not_on_stream`` (a stream has no capacity),
    and the redis-server-clock variant of those not marked ``server_clock`` (their
    waits pass at once on a mock clock, and would take their full time on this one)."""
    choice = config.getoption("alone")
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        alone = item.get_closest_marker("alone") is not None
        wanted = choice == "include" or alone == (choice == "only")
        if (
            item.get_closest_marker("not_on_cluster") is not None
            and _variant(item) == "redis-cluster"
        ):
            wanted = False
        if (
            item.get_closest_marker("not_on_stream") is not None
            and _variant(item) == "redis-stream"
        ):
            wanted = False
        if item.get_closest_marker("server_clock") is None and _variant(item) == SERVER_CLOCK:
            wanted = False
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _variant(item: pytest.Item) -> str | None:
    """The backend a contract test runs on (None for any other test)."""
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("make_backend")


class TestTimedOut(Exception):
    """An async test ran past its real-time limit (`TEST_TIME_LIMIT`, or its `time_limit`)."""


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Put every async test under the real-time limit (before pytest-trio wraps it)."""
    test = getattr(item, "obj", None)
    if test is not None and inspect.iscoroutinefunction(test):
        marker = item.get_closest_marker("time_limit")
        limit = float(marker.args[0]) if marker else TEST_TIME_LIMIT
        item.obj = _limited(test, limit)  # type: ignore[attr-defined]
    yield


def _limited(test: Callable[..., Awaitable[None]], limit: float) -> Callable[..., Awaitable[None]]:
    """*test*, failed with `TestTimedOut` once it has run *limit* real seconds.

    A timer thread cancels it, on the real clock, so it works on a mock clock too.
    """

    @functools.wraps(test)
    async def limited(**kwargs: object) -> None:
        token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            timer = threading.Timer(
                limit, trio.from_thread.run_sync, (scope.cancel,), {"trio_token": token}
            )
            timer.start()
            try:
                await test(**kwargs)
            finally:
                timer.cancel()
        if scope.cancelled_caught:
            raise TestTimedOut(
                f"the test ran for {limit:.0f} s of real time: something waits for "
                "ever (a queue, a pool, a reply)"
            )

    return limited


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A private Redis server for the whole session, on a free port (never 6379)."""
    server = RedisServer(find_server_binary())
    server.start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A private Redis Cluster (3 masters, 3 replicas) for the whole session."""
    with started_cluster() as cluster:
        yield cluster


async def _connected(backend: trioqueue.RedisBackend) -> trioqueue.RedisBackend:
    """Open *backend* in a system task that keeps it open until the Trio run ends."""
    started = trio.Event()

    async def hold() -> None:
        async with backend:
            started.set()
            await trio.sleep_forever()

    trio.lowlevel.spawn_system_task(hold)
    await started.wait()
    return backend


# Redis requests in flight in this test process, and the mock clock's threshold before them
_in_flight: dict[str, Any] = {"count": 0, "threshold": 0.0}
# what a connection may wait on for long: the BLMOVE that waits for jobs is idle time
_REQUESTS = ("run", "run_replicated", "hash", "hashes", "list_items", "exists", "unblock")


def _hold_the_clock(connection: object) -> None:
    """Keep a mock clock from jumping while one of *connection*'s requests is in flight.

    A reply that takes longer than the autojump threshold (a loaded machine, a
    client's own thread) would otherwise let the clock jump past deadlines the
    test is about. The threshold is set back when the last request returns
    (one count per process: several backends in one test share it).
    """
    for name in _REQUESTS:
        method = getattr(connection, name, None)
        if method is None:
            continue  # a request only one client has

        @functools.wraps(method)
        async def held(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            clock = trio.lowlevel.current_clock()
            if not isinstance(clock, trio.testing.MockClock):
                return await _method(*args, **kwargs)
            if _in_flight["count"] == 0:
                _in_flight["threshold"] = clock.autojump_threshold
                clock.autojump_threshold = math.inf
            _in_flight["count"] += 1
            try:
                return await _method(*args, **kwargs)
            finally:
                _in_flight["count"] -= 1
                if _in_flight["count"] == 0:
                    clock.autojump_threshold = _in_flight["threshold"]

        setattr(connection, name, held)


@pytest.fixture(params=BACKENDS)
def make_backend(request: pytest.FixtureRequest) -> MakeBackend:
    """``await make_backend(capacity=…, retention=…)``: a fresh, empty backend of each kind.

    Redis backends get a queue of their own on the session's private server, and
    run on Trio's clock so the mock-clock tests mean the same on both; the
    redis-server-clock variant, of the tests marked ``server_clock``, is made as
    production makes it (the server's clock in the scripts, Trio's real clock).
    ``make_backend.redelivers`` says whether a crashed owner's job runs again
    (at-least-once) or becomes a dead letter (the simple, at-most-once queue).
    """
    kind = request.param

    async def make(
        capacity: int = 1000, retention: trioqueue.Retention | int | None = None
    ) -> trioqueue.Backend:
        options = {} if retention is None else {"retention": retention}
        if kind == "memory":
            return trioqueue.MemoryBackend(capacity, **options)
        if kind == "redis-stream":  # a stream has no capacity (tests of it are not_on_stream)
            backend = trioqueue.RedisBackend(
                request.getfixturevalue("redis_server").url,
                stream="{s-" + uuid.uuid4().hex[:12] + "}",
                group="workers",
                min_idle=30,
                clock=trio.current_time,
                **options,
            )
            _hold_the_clock(backend._conn)
            return await _connected(backend)
        if kind == "redis-cluster":  # reliable, on a cluster of three masters
            url = request.getfixturevalue("redis_cluster").url + "?cluster=yes"
        else:
            url = request.getfixturevalue("redis_server").url
        production = kind == SERVER_CLOCK  # as production makes it: the server's clock
        backend = trioqueue.RedisBackend(
            url,
            queue="{t-" + uuid.uuid4().hex[:12] + "}",
            capacity=capacity,
            min_idle=30,
            clock=None if production else trio.current_time,
            reliable=kind != "redis-simple",
            **options,
        )
        if not production:  # a real clock needs no hold
            _hold_the_clock(backend._conn)  # the private attribute: a test-only look inside
        return await _connected(backend)

    make.kind = kind  # type: ignore[attr-defined]
    make.redelivers = kind != "redis-simple"  # type: ignore[attr-defined]
    return make


@pytest.fixture
def autojump_clock(request: pytest.FixtureRequest) -> trio.testing.MockClock | None:
    """pytest-trio's autojump clock; with a Redis backend it jumps only after 20 ms idle.

    Waiting for a Redis reply leaves every task blocked; a clock that jumped at
    once would fire timeouts while the reply is on its way. The server-clock
    variant gets none: the test runs on Trio's real clock, as production does.
    """
    callspec = getattr(request.node, "callspec", None)
    kind = callspec.params.get("make_backend") if callspec else None
    if kind == SERVER_CLOCK:
        return None
    return trio.testing.MockClock(autojump_threshold=JUMP_AFTER[kind or "memory"])


async def settle() -> None:
    """Wait until every task has been blocked for a moment (Redis replies included)."""
    await trio.testing.wait_all_tasks_blocked(cushion=0.02)


def collect(records: list[trioqueue.Job]) -> trioqueue.Handler:
    """A handler that appends every job it is given to *records* and returns."""

    async def handler(job: trioqueue.Job) -> None:
        records.append(job)

    return handler
