"""What a pool runs: the handler type, its checks, and `Tasks`, the handlers by task name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeAlias, TypeVar, final

import attrs
import trio

from .._exceptions import ConfigurationError, UnknownTask
from .._records import Job
from .._task import Task, is_handler

__all__ = [
    "Chosen",
    "Handler",
    "Handlers",
    "Middleware",
    "Tasks",
    "check_handler",
    "dispatch",
    "is_handler",
]


Handler = Callable[[Job], Awaitable[object]]
"""An async function run once per attempt; returning completes the job.

With ``reply_to``, a return value other than None is published as a new job.
"""

_T = TypeVar("_T")

Middleware: TypeAlias = Callable[[Job, Callable[[Job], Awaitable[object]]], Awaitable[object]]
"""``async def middleware(job, call_next) -> object``: around each attempt (`open_worker_pool`)."""

Handlers: TypeAlias = Handler | Task | Mapping[str, Handler | Task] | list[Task] | tuple[Task, ...]
"""What a pool runs: one handler (or `Task`) for every job, or several by task name."""


@final
@attrs.frozen
class Chosen:
    """What one attempt of a job runs, and with which settings.

    Each setting is the job's own (stored by its producer), else its task's, else
    the pool's.
    """

    task: Task | UnknownTask
    """The task that runs the job, or the error its attempt fails with."""
    handler_timeout: float | None
    """Seconds the attempt may run; None for no limit."""
    max_attempts: int | None
    """The attempts the job gets; None for the pool's `RetryPolicy`."""

    middleware: tuple[Middleware, ...] = ()
    """The pool's middleware, outermost first."""

    def run(self, job: Job, threads: trio.CapacityLimiter) -> Awaitable[object]:
        """Run the handler on *job* through the middleware (a *run_sync* one in a thread).

        A plain async handler with no middleware is called directly: its coroutine
        is the attempt, with no frame of ours between it and the worker (each
        frame costs on every resume of the handler, a few per cent of a queue's
        throughput).
        """
        task = self.task
        if (
            not self.middleware
            and not isinstance(task, UnknownTask)
            and task.payload_type is None
            and not task.run_sync
        ):
            return task.handler(job)  # type: ignore[no-any-return]

        async def attempt(job: Job) -> object:
            if isinstance(task, UnknownTask):
                raise task
            if task.payload_type is not None:
                job = attrs.evolve(job, payload=task.typed_payload(job))
            if task.run_sync:
                # not abandoned on cancel: the thread's work ends before the job is let go
                return await trio.to_thread.run_sync(task.handler, job, limiter=threads)
            return await task.handler(job)

        call: Callable[[Job], Awaitable[object]] = attempt
        for middleware in reversed(self.middleware):
            call = _wrapped(middleware, call)
        return call(job)


def _wrapped(
    middleware: Middleware, inner: Callable[[Job], Awaitable[object]]
) -> Callable[[Job], Awaitable[object]]:
    """*inner*, called through *middleware*."""

    async def call(job: Job) -> object:
        return await middleware(job, inner)

    return call


@final
class Tasks:
    """A pool's handlers, each as a `Task`: one for every job, or one per task name.

    Raises:
        TypeError: A handler is not an async function (nor a `Task`), or a name is
            not a str.
        ConfigurationError: There are none, two tasks share a name, or a table
            files a `Task` under another name than its own.
    """

    def __init__(self, handlers: Handlers, middleware: Sequence[Middleware] = ()) -> None:
        self._middleware = tuple(middleware)
        for each in self._middleware:
            if not is_handler(each):
                raise TypeError(
                    f"open_worker_pool(middleware=...): {each!r} is not an async function; "
                    "define it as `async def middleware(job, call_next): return await "
                    "call_next(job)`"
                )
        self._only: Task | None = None
        self._plain: tuple[float | None, Chosen] | None = None  # see choose
        self._table: dict[str, Task] = {}
        if isinstance(handlers, Task):
            self._only = handlers
        elif isinstance(handlers, Mapping):
            self._table = _table(handlers)
        elif isinstance(handlers, list | tuple):
            self._table = _listed(handlers)
        else:
            check_handler(handlers)
            self._only = Task("handler", handlers)
        self._known = ", ".join(sorted(self._table))

    def choose(self, job: Job, handler_timeout: float | None) -> Chosen:
        """What runs *job*, with its settings; *handler_timeout* is the pool's."""
        plain = job.handler_timeout is None and job.max_attempts is None
        if plain and self._only is not None:  # the common case, made once
            if self._plain is None or self._plain[0] != handler_timeout:
                self._plain = (handler_timeout, self._chosen(job, self._only, handler_timeout))
            return self._plain[1]
        return self._chosen(job, self.find(job), handler_timeout)

    def _chosen(self, job: Job, task: Task | UnknownTask, handler_timeout: float | None) -> Chosen:
        """*task* for *job*, with the job's own settings, else the task's, else the pool's."""
        own = None if isinstance(task, UnknownTask) else task
        timeout = _first(job.handler_timeout, None if own is None else own.handler_timeout)
        return Chosen(
            task,
            handler_timeout if timeout is None else timeout,
            _first(job.max_attempts, None if own is None else own.max_attempts),
            self._middleware,
        )

    def find(self, job: Job) -> Task | UnknownTask:
        """The task that runs *job*, or the `UnknownTask` its attempt fails with."""
        if self._only is not None:
            return self._only
        if job.task is None:
            return UnknownTask(
                f"job {job.id} has no task name, and this worker runs jobs by task (it has "
                f"{self._known}): enqueue it with task= one of those"
            )
        chosen = self._table.get(job.task)
        if chosen is None:
            return UnknownTask(
                f"job {job.id} names task {job.task!r}, which this worker has no handler for "
                f"(it has {self._known}); enqueue it with one of those names, or deploy a "
                "worker with that handler and requeue the dead letter"
            )
        return chosen


def _first(own: _T | None, task: _T | None) -> _T | None:
    """A job's own setting when it has one, else its task's."""
    return task if own is None else own


def _table(handlers: Mapping[str, Handler | Task]) -> dict[str, Task]:
    """A table of task names to handlers or tasks, each checked, as tasks."""
    if not handlers:
        raise ConfigurationError(
            "open_worker_pool: give at least one handler, as {'task name': handler}"
        )
    table: dict[str, Task] = {}
    for name, handler in handlers.items():
        if not isinstance(name, str):
            raise TypeError(f"open_worker_pool: task names are strs, not {name!r}")
        if isinstance(handler, Task):
            if handler.name != name:
                raise ConfigurationError(
                    f"open_worker_pool: the task {handler.name!r} is filed under {name!r}; "
                    "file each Task under its own name, or give the tasks as a list"
                )
            table[name] = handler
        else:
            check_handler(handler)
            table[name] = Task(name, handler)
    return table


def _listed(tasks: Sequence[Task]) -> dict[str, Task]:
    """A list of tasks as a table by name, refusing two of one name."""
    if not tasks:
        raise ConfigurationError("open_worker_pool: give at least one Task in the list")
    table: dict[str, Task] = {}
    for each in tasks:
        if not isinstance(each, Task):
            raise TypeError(
                f"open_worker_pool: a list holds Tasks, not {type(each).__name__}; for "
                "plain handlers give a table {'task name': handler}"
            )
        if each.name in table:
            raise ConfigurationError(
                f"open_worker_pool: two tasks named {each.name!r}; give each task a name of its own"
            )
        table[each.name] = each
    return table


def dispatch(
    handlers: Mapping[str, Handler | Task] | list[Task] | tuple[Task, ...],
) -> Handler:
    """One handler that runs each job with the handler its task names (`Job.task`).

    A job with no task, or a task this pool does not know, fails its attempt with
    `UnknownTask`, and is retried like any failure: during a rolling deploy
    another worker may know the task, and otherwise the job ends as a dead letter
    that names it, to requeue once a worker has the handler.

    A pool given the table itself (``open_worker_pool(backend, handlers)``) also
    applies each `Task`'s attempts and timeout; through `dispatch` a task's
    handler runs (a *run_sync* one in a thread) with its typed payload, and the
    settings are the pool's.

    Raises:
        TypeError: A handler is not an async function, or a name is not a str.
        ConfigurationError: *handlers* is empty, or as `open_worker_pool` says.
    """
    tasks = Tasks(handlers)

    async def run(job: Job) -> object:
        threads = trio.to_thread.current_default_thread_limiter()
        return await tasks.choose(job, None).run(job, threads)

    return run


def check_handler(handler: object) -> None:
    """Refuse a handler that is not an async function (or an object with an async __call__)."""
    if is_handler(handler):
        return
    name = getattr(handler, "__name__", type(handler).__name__)
    name = "handler" if name == "<lambda>" else name
    raise TypeError(
        f"open_worker_pool(handler={name}): the handler must be an async function; define it "
        f"as `async def {name}(job): ...` (a plain def would run, then fail every attempt), "
        f"or, to run a blocking function in a thread, give Task({name!r}, {name}, "
        "run_sync=True)"
    )
