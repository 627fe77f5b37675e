"""What a handler is: the type, the check that one is async, and `dispatch` by task name."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping

from .._exceptions import ConfigurationError, UnknownTask
from .._records import Job

__all__ = ["Handler", "check_handler", "dispatch", "is_handler"]


Handler = Callable[[Job], Awaitable[object]]
"""An async function run once per attempt; returning completes the job.

With ``reply_to``, a return value other than None is published as a new job.
"""


def dispatch(handlers: Mapping[str, Handler]) -> Handler:
    """One handler that runs each job with the handler its task names (`Job.task`).

    A job with no task, or a task this pool does not know, fails its attempt with
    `UnknownTask`, and is retried like any failure: during a rolling deploy
    another worker may know the task, and otherwise the job ends as a dead letter
    that names it, to requeue once a worker has the handler.

    Raises:
        TypeError: A handler is not an async function, or a name is not a str.
        ConfigurationError: *handlers* is empty.
    """
    if not handlers:
        raise ConfigurationError(
            "open_worker_pool: give at least one handler, as {'task name': handler}"
        )
    table = dict(handlers)
    for name, handler in table.items():
        if not isinstance(name, str):
            raise TypeError(f"open_worker_pool: task names are strs, not {name!r}")
        check_handler(handler)
    known = ", ".join(sorted(table))

    async def run(job: Job) -> object:
        if job.task is None:
            raise UnknownTask(
                f"job {job.id} has no task name, and this worker runs jobs by task (it has "
                f"{known}): enqueue it with task= one of those"
            )
        chosen = table.get(job.task)
        if chosen is None:
            raise UnknownTask(
                f"job {job.id} names task {job.task!r}, which this worker has no handler for "
                f"(it has {known}); enqueue it with one of those names, or deploy a worker "
                "with that handler and requeue the dead letter"
            )
        return await chosen(job)

    return run


def is_handler(target: object) -> bool:
    """Whether *target* is an async function (or an object with an async ``__call__``)."""
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an instance with async __call__
    )


def check_handler(handler: object) -> None:
    """Refuse a handler that is not an async function (or an object with an async __call__)."""
    if is_handler(handler):
        return
    name = getattr(handler, "__name__", type(handler).__name__)
    name = "handler" if name == "<lambda>" else name
    raise TypeError(
        f"open_worker_pool(handler={name}): the handler must be an async function; define it "
        f"as `async def {name}(job): ...` (a plain def would run, then fail every attempt)"
    )
