"""What a producer hands in, checked and encoded before anything is sent: `prepare`.

Every way a job comes in (`Queue`, the CLI's ``enqueue``, the HTTP service) goes
through `prepare`, so each refuses the same input with the same message.
"""

from __future__ import annotations

import datetime
import math
import time
from typing import Any, TypeAlias, TypedDict

from ._backend_values import NewJob
from ._payload import (
    MAX_ID_LENGTH,
    MAX_PAYLOAD,
    MAX_TASK_NAME,
    PRIORITIES,
    canonical_json,
    new_job_id,
    payload_hash,
)
from ._util import MAX_DELAY

__all__ = ["Delay", "JobOptions", "due_time", "known_options", "prepare"]

Delay: TypeAlias = float | datetime.timedelta
"""A delay: seconds (an int or a float), or a `datetime.timedelta`."""


class JobOptions(TypedDict, total=False):
    """What an enqueue may say of a job besides its payload and id (see `Queue.enqueue`)."""

    delay: Delay | None
    at: datetime.datetime | None
    max_attempts: int | None
    handler_timeout: float | None
    task: str | None
    priority: int


def due_time(
    delay: Delay | None, at: datetime.datetime | None
) -> tuple[float | None, float | None]:
    """Check a job's *delay* or *at*; return them as seconds and as an epoch time.

    Raises:
        TypeError: Both are given, or one has the wrong type.
        ValueError: *delay* is negative or not finite, *at* has no time zone, or
            either is more than `MAX_DELAY` (100 years) ahead.
    """
    if delay is not None and at is not None:
        raise TypeError("give a job delay=... or at=..., not both")
    if at is not None:
        if not isinstance(at, datetime.datetime):
            raise TypeError(
                f"at= takes a datetime.datetime with a time zone, not {type(at).__name__}; "
                "for a number of seconds from now use delay="
            )
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(
                f"at={at.isoformat()} has no time zone, so the moment it names is unknown: "
                "give it one, e.g. datetime.now(timezone.utc) + timedelta(minutes=5)"
            )
        if at.timestamp() - time.time() > MAX_DELAY:
            raise ValueError(
                f"at={at.isoformat()} is more than 100 years ahead: give a moment within "
                "that, or keep the job out of the queue until it is nearer"
            )
        return None, at.timestamp()
    if delay is None:
        return None, None
    if isinstance(delay, datetime.timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise TypeError(
            f"delay= takes seconds (an int or a float) or a datetime.timedelta, "
            f"not {type(delay).__name__}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"delay={delay!r}: use a finite number of seconds >= 0")
    if seconds > MAX_DELAY:
        raise ValueError(
            f"delay={delay!r} is more than 100 years ({MAX_DELAY:.0f} s): give a shorter "
            "delay, or keep the job out of the queue until it is nearer"
        )
    return (seconds or None), None


def prepare(
    payload: Any,
    job_id: str | None,
    max_payload: int = MAX_PAYLOAD,
    *,
    delay: Delay | None = None,
    at: datetime.datetime | None = None,
    max_attempts: int | None = None,
    handler_timeout: float | None = None,
    task: str | None = None,
    priority: int = 0,
) -> NewJob:
    """Check and encode a job on its way in; raise TypeError or ValueError on bad input."""
    seconds, epoch = due_time(delay, at)
    _check_options(max_attempts, handler_timeout)
    _check_task(task)
    _check_priority(priority)
    if job_id is None:
        job_id = new_job_id()
    elif not isinstance(job_id, str):
        raise TypeError(f"a job id must be a str, not {type(job_id).__name__}; pass id=str(...)")
    elif not job_id or len(job_id) > MAX_ID_LENGTH:
        raise ValueError(
            f"a job id must be 1 to {MAX_ID_LENGTH} characters long, got {len(job_id)}; "
            "leave id=None for a fresh one"
        )
    elif not job_id.isascii() and not _is_unicode_text(job_id):
        raise ValueError(
            f"a job id must be text that UTF-8 can encode; {job_id!r} holds a lone surrogate "
            "(half of a character): fix what made it, or leave id=None for a fresh one"
        )
    encoded = canonical_json(payload)
    if len(encoded) > max_payload:
        raise ValueError(
            f"the job payload takes {len(encoded):,} bytes as JSON, over the queue's "
            f"max_payload of {max_payload:,}; store the bulk elsewhere and send a reference, "
            "or give the Queue a larger max_payload"
        )
    return NewJob(
        id=job_id,
        encoded=encoded,
        payload_hash=payload_hash(encoded),
        delay=seconds,
        at=epoch,
        max_attempts=max_attempts,
        handler_timeout=None if handler_timeout is None else float(handler_timeout),
        task=task,
        priority=priority,
    )


def known_options(options: JobOptions) -> JobOptions:
    """*options*, refused with TypeError if one is no `JobOptions` key (a typo)."""
    unknown = sorted(set(options) - set(JobOptions.__annotations__))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r}: a job takes id=, and "
            f"{', '.join(f'{name}=' for name in JobOptions.__annotations__)}"
        )
    return options


def check_options(max_attempts: Any, handler_timeout: Any, task: Any) -> None:
    """Check a job's own options as `prepare` does; raise TypeError or ValueError."""
    _check_options(max_attempts, handler_timeout)
    _check_task(task)


def _check_task(task: str | None) -> None:
    """Check a job's task name; raise TypeError or ValueError."""
    if task is None:
        return
    if not isinstance(task, str):
        raise TypeError(f"task= takes the name of a handler (a str), not {type(task).__name__}")
    if not 1 <= len(task) <= MAX_TASK_NAME or not task.isprintable():
        raise ValueError(
            f"task={task!r}: name the handler in 1 to {MAX_TASK_NAME} printable characters"
        )


def _check_priority(priority: int) -> None:
    """Check a job's priority level; raise TypeError or ValueError."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(
            f"priority= takes a whole number from {PRIORITIES[-1]} to {PRIORITIES[0]}, "
            f"not {type(priority).__name__}"
        )
    if priority not in PRIORITIES:
        raise ValueError(
            f"priority={priority!r}: a job's level is a whole number from {PRIORITIES[-1]} "
            f"to {PRIORITIES[0]} (higher runs first; 0 is the default)"
        )


def _check_options(max_attempts: int | None, timeout: float | None) -> None:
    """Check a job's own attempts and timeout; raise TypeError or ValueError."""
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
    ):
        raise TypeError(f"max_attempts= takes a whole number, not {type(max_attempts).__name__}")
    if max_attempts is not None and max_attempts < 1:
        raise ValueError(f"max_attempts={max_attempts!r}: a job gets at least one attempt")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        raise TypeError(
            f"handler_timeout= takes seconds (an int or a float), not {type(timeout).__name__}"
        )
    if timeout is not None and not (math.isfinite(timeout) and 0 < timeout <= MAX_DELAY):
        raise ValueError(
            f"handler_timeout={timeout!r}: give the seconds one attempt may run, more than 0 "
            "and at most 100 years, or None for the pool's own"
        )


def _is_unicode_text(text: str) -> bool:
    """Whether *text* encodes as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
