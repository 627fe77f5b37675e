"""`Task`: a handler under its task name, with defaults of its own (attempts, timeout, priority)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, final

import attrs

from ._exceptions import ConfigurationError
from ._job_checks import check_attempts_and_timeout, check_priority, check_task

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from ._records import Job

__all__ = ["Task", "is_handler", "task"]


def is_handler(target: object) -> bool:
    """Whether *target* is an async function (or an object with an async ``__call__``)."""
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an instance with async __call__
    )


def _check(instance: Task) -> None:
    """Refuse a task whose settings no job could take, naming the setting."""
    if not isinstance(instance.name, str):
        raise TypeError(f"Task(name=...) takes the task's name (a str), not {instance.name!r}")
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
    if instance.payload_type is not None:
        try:
            _msgspec().inspect.type_info(instance.payload_type)
        except TypeError as exc:
            raise TypeError(
                f"Task({instance.name!r}, payload_type={instance.payload_type!r}): msgspec "
                f"cannot check payloads against it ({exc}); give an attrs class, a dataclass, "
                "a TypedDict, a msgspec Struct or a plain type"
            ) from None
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
        payload_type: The type of this task's payloads (an attrs class, a
            dataclass, a `typing.TypedDict`, a msgspec ``Struct``, or any type
            msgspec converts to and from JSON): an ``enqueue(..., task=...)`` given
            the task checks the payload against it (raising `ValueError` and
            storing nothing when it does not fit) and takes an instance of it as
            well as its fields; the handler gets `Job.payload` as an instance.
            Needs msgspec (``pip install 'trioqueue[typed]'``).
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
    payload_type: Any = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _check(self)

    def stored_payload(self, payload: Any) -> Any:
        """*payload* as JSON values, checked against *payload_type* (if any).

        Raises:
            ValueError: It does not fit *payload_type*; the message says where.
        """
        if self.payload_type is None:
            return payload
        msgspec = _msgspec()
        try:
            # an instance is checked too: a dataclass or attrs class does not check
            # its own fields' types when it is made
            fields = msgspec.to_builtins(payload)
            return msgspec.to_builtins(msgspec.convert(fields, self.payload_type))
        except (msgspec.ValidationError, TypeError) as exc:
            raise ValueError(
                f"the payload does not fit the payload_type of task {self.name!r} "
                f"({_type_name(self.payload_type)}): {exc}; nothing was stored"
            ) from None

    def typed_payload(self, job: Job) -> Any:
        """*job*'s payload as an instance of *payload_type* (as it is, without one).

        Raises:
            ValueError: It does not fit; the message names the job and says where.
        """
        if self.payload_type is None:
            return job.payload
        msgspec = _msgspec()
        try:
            return msgspec.convert(job.payload, self.payload_type)
        except msgspec.ValidationError as exc:
            raise ValueError(
                f"job {job.id}'s payload does not fit the payload_type of task {self.name!r} "
                f"({_type_name(self.payload_type)}): {exc}; enqueue it with task= the Task "
                "itself so it is checked at once, fix it, and requeue the dead letter"
            ) from None


def _msgspec() -> ModuleType:
    """msgspec, imported when a task first needs it."""
    try:
        import msgspec
    except ImportError:
        raise ConfigurationError(
            "a Task's payload_type needs msgspec: pip install 'trioqueue[typed]'"
        ) from None
    return msgspec


def _type_name(payload_type: object) -> str:
    return getattr(payload_type, "__qualname__", repr(payload_type))


def task(
    name: str | None = None,
    *,
    max_attempts: int | None = None,
    handler_timeout: float | None = None,
    priority: int | None = None,
    run_sync: bool = False,
    payload_type: Any = None,
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
            payload_type=payload_type,
        )

    return make
