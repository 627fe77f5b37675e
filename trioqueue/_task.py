"""`Task`: a handler under its task name, with defaults of its own (attempts, timeout, priority)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, final

import attrs

from ._job_checks import check_attempts_and_timeout, check_priority, check_task

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._records import Job

__all__ = ["Task", "is_handler", "task"]


def is_handler(target: object) -> bool:
    """Whether *target* is an async function (or an object with an async ``__call__``)."""
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an instance with async __call__
    )


def _check(instance: Task) -> None:
    """Refuse a task whose settings no job could take, naming the setting."""
    check_task(instance.name)
    check_attempts_and_timeout(instance.max_attempts, instance.handler_timeout)
    if instance.priority is not None:
        check_priority(instance.priority)
    if not callable(instance.handler):
        raise TypeError(
            f"Task({instance.name!r}): the handler {instance.handler!r} is not callable; "
            "give the function that runs each job"
        )
    if instance.run_sync and is_handler(instance.handler):
        raise TypeError(
            f"Task({instance.name!r}, run_sync=True): the handler is an async function, "
            "and an async function runs on the event loop; leave run_sync out"
        )
    if not instance.run_sync and not is_handler(instance.handler):
        raise TypeError(
            f"Task({instance.name!r}): the handler is a plain function; make it "
            "`async def`, or pass run_sync=True to run it in a thread"
        )


@final
@attrs.frozen
class Task:
    """A handler under its task name, with defaults for the jobs of that task.

    A pool takes tasks in place of handlers (``open_worker_pool(backend,
    [resize, send_email])``, or a table ``{"resize": resize, ...}`` whose keys are
    their names); a producer may name the task by it (``enqueue(payload,
    task=resize)``). What a job says for itself comes first, then its task's
    default, then the pool's:

    - *max_attempts* and *handler_timeout* are read by the pool that runs the job,
      from the task it has under the job's name;
    - *priority* is read by the producer, when ``enqueue(..., task=...)`` is given
      the task itself rather than its name.

    Args:
        name: The task name jobs carry (`Job.task`), 1 to 200 printable characters.
        handler: ``async def handler(job) -> object``; with *run_sync*, a plain function.
        max_attempts: The attempts a job of this task gets, unless it has its own;
            None: the pool's `RetryPolicy`.
        handler_timeout: Seconds one attempt may run, unless the job has its own;
            None: the pool's.
        priority: The level (`PRIORITIES`) a producer gives a job of this task
            when it names no *priority*; None: 0.
        run_sync: Run a plain (blocking) function in a worker thread, at most the
            pool's *workers* at once. Trio cannot interrupt a thread: a timeout, a
            cancelled job or a shutdown's end of grace reaches it only where it calls
            `trio.from_thread.check_cancelled` (which then raises), or when it
            returns; until then the pool waits for it, and a shutdown's grace is
            exceeded by as long. Call it between steps of long work.

    Raises:
        TypeError: The handler is not callable, is a plain function without
            *run_sync*, or is async with *run_sync*.
        ValueError: A setting is out of range; the message names it.
    """

    name: str
    handler: Callable[[Job], Any]
    max_attempts: int | None = attrs.field(default=None, kw_only=True)
    handler_timeout: float | None = attrs.field(default=None, kw_only=True)
    priority: int | None = attrs.field(default=None, kw_only=True)
    run_sync: bool = attrs.field(default=False, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _check(self)


def task(
    name: str | None = None,
    *,
    max_attempts: int | None = None,
    handler_timeout: float | None = None,
    priority: int | None = None,
    run_sync: bool = False,
) -> Callable[[Callable[[Job], Any]], Task]:
    """Make the decorated function a `Task`, named after it unless *name* is given.

    ::

        @trioqueue.task(max_attempts=3, handler_timeout=30)
        async def send_email(job: trioqueue.Job) -> None: ...

    The arguments are `Task`'s.
    """

    def make(handler: Callable[[Job], Any]) -> Task:
        return Task(
            getattr(handler, "__name__", "") if name is None else name,
            handler,
            max_attempts=max_attempts,
            handler_timeout=handler_timeout,
            priority=priority,
            run_sync=run_sync,
        )

    return make
