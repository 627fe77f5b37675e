"""What a producer hands in, checked and encoded before anything is sent: `prepare`.

Every way a job comes in (`Queue`, the CLI's ``enqueue``, the HTTP service) goes
through `prepare`, so each refuses the same input with the same message.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias, TypedDict

from ._backend_values import NewJob, Receipt
from ._job_checks import (
    MAX_AFTER,
    check_attempts_and_timeout,
    check_headers,
    check_priority,
    check_task,
    control_character,
)
from ._payload import (
    MAX_ID_LENGTH,
    MAX_PAYLOAD,
    canonical_json,
    new_job_id,
    payload_hash,
)
from ._task import Task
from ._util import MAX_DELAY

__all__ = ["Delay", "JobOptions", "due_time", "known_options", "prepare", "prepare_plain"]

Delay: TypeAlias = float | datetime.timedelta
"""A delay: seconds (an int or a float), or a `datetime.timedelta`."""


class JobOptions(TypedDict, total=False):
    """What an enqueue may say of a job besides its payload and id (see `Queue.enqueue`)."""

    delay: Delay | None
    at: datetime.datetime | None
    max_attempts: int | None
    handler_timeout: float | None
    task: str | Task | None
    priority: int | None
    headers: Mapping[str, str] | None
    after: Iterable[str | Receipt] | None
    unique_key: str | None
    debounce: Delay | None
    rate_key: str | None


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
    task: str | Task | None = None,
    priority: int | None = None,
    headers: Mapping[str, str] | None = None,
    after: Iterable[str | Receipt] | None = None,
    unique_key: str | None = None,
    debounce: Delay | None = None,
    rate_key: str | None = None,
) -> NewJob:
    """Check and encode a job on its way in; raise TypeError or ValueError on bad input.

    A `Task` given as *task* names the job's task, checks the payload against its
    *payload_type*, and gives its *priority* when the call gives none.
    """
    seconds, epoch = due_time(delay, at)
    if isinstance(task, Task):
        payload = task.stored_payload(payload)
        if priority is None:
            priority = task.priority
        task = task.name
    if priority is None:
        priority = 0
    check_attempts_and_timeout(max_attempts, handler_timeout)
    check_task(task)
    check_priority(priority)
    checked_headers = check_headers(headers)
    if job_id is None:
        job_id = new_job_id()
    else:
        _check_id(job_id, "a job id", "leave id=None for a fresh one")
    parents = _check_after(after, job_id)
    if parents and (seconds is not None or epoch is not None):
        raise TypeError(
            "a job runs after=[...] other jobs or at a due time (delay=, at=), not both: "
            "it starts as soon as the jobs it runs after complete"
        )
    if unique_key is not None:
        _check_key(unique_key, "a unique_key", "give a short text naming what the job is for")
    if rate_key is not None:
        _check_key(rate_key, "a rate_key", "give a short text naming whom the job is for")
    if debounce is not None:
        if unique_key is None:
            raise TypeError(
                "debounce= needs a unique_key=: a newer job replaces the waiting one with "
                "the same key"
            )
        if seconds is not None or epoch is not None or parents:
            raise TypeError(
                "debounce= sets when the job is due (that long after the last job with its "
                "key): give it without delay=, at= or after="
            )
        try:
            seconds, _ = due_time(debounce, None)
        except TypeError as exc:  # its words name delay=: this is debounce=
            raise TypeError(str(exc).replace("delay=", "debounce=", 1)) from None
        except ValueError as exc:
            if "more than" in str(exc):  # too long: the words of delay=, for debounce=
                raise ValueError(str(exc).replace("delay=", "debounce=", 1)) from None
            seconds = None  # negative or not finite: what debounce= takes, said below
        if seconds is None:
            raise ValueError(f"debounce={debounce!r}: give a finite number of seconds > 0")
    encoded = _encoded(payload, max_payload)
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
        headers=checked_headers,
        after=parents,
        unique_key=unique_key,
        debounce=debounce is not None,
        rate_key=rate_key,
    )


def prepare_plain(payload: Any, job_id: str | None, max_payload: int = MAX_PAYLOAD) -> NewJob:
    """`prepare` for a job given no option: the same checks of what it has, and no others."""
    if job_id is None:
        job_id = new_job_id()
    else:
        _check_id(job_id, "a job id", "leave id=None for a fresh one")
    encoded = _encoded(payload, max_payload)
    return NewJob(id=job_id, encoded=encoded, payload_hash=payload_hash(encoded))


def _encoded(payload: Any, max_payload: int) -> bytes:
    """*payload*'s canonical JSON; raise TypeError or ValueError as `prepare` says."""
    encoded = canonical_json(payload)
    if len(encoded) > max_payload:
        raise ValueError(
            f"the job payload takes {len(encoded):,} bytes as JSON, over the queue's "
            f"max_payload of {max_payload:,}; store the bulk elsewhere and send a reference, "
            "or give the Queue a larger max_payload"
        )
    return encoded


def _check_id(job_id: object, what: str, fix: str) -> None:
    """Raise TypeError or ValueError, saying *what* the id is and how to *fix* it, unless valid."""
    if not isinstance(job_id, str):
        raise TypeError(f"{what} must be a str, not {type(job_id).__name__}; pass str(...)")
    if not job_id or len(job_id) > MAX_ID_LENGTH:
        raise ValueError(
            f"{what} must be 1 to {MAX_ID_LENGTH} characters long, got {len(job_id)}; {fix}"
        )
    if not job_id.isascii() and not _is_unicode_text(job_id):
        raise ValueError(
            f"{what} must be text that UTF-8 can encode; {job_id!r} holds a lone surrogate "
            f"(half of a character): fix what made it, or {fix}"
        )


def _check_key(key: object, what: str, fix: str) -> None:
    """`_check_id`, and no control character: a key is one line of printable text."""
    _check_id(key, what, fix)
    assert isinstance(key, str)
    if (char := control_character(key)) is not None:
        raise ValueError(
            f"{what} must hold no control character, and {key!r} holds {char!r}; {fix}"
        )


def _check_after(after: Iterable[str | Receipt] | None, job_id: str) -> tuple[str, ...]:
    """The ids of the jobs *job_id* runs after, each once, in order; TypeError or ValueError."""
    if after is None:
        return ()
    if isinstance(after, str | Receipt) or not isinstance(after, Iterable):
        raise TypeError(
            f"after= takes a list of job ids (or Receipts), not {type(after).__name__}; for "
            "one job write after=[receipt]"
        )
    parents: dict[str, None] = {}
    for item in after:
        parent = item.id if isinstance(item, Receipt) else item
        _check_id(parent, "an id in after=", "pass the ids (or Receipts) enqueue returned")
        if parent == job_id:
            raise ValueError(f"job {job_id!r} cannot run after itself: drop it from after=")
        parents[parent] = None
    if len(parents) > MAX_AFTER:
        raise ValueError(
            f"a job runs after at most {MAX_AFTER} jobs, got {len(parents)}: run it after one "
            "job that runs after them all"
        )
    return tuple(parents)


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
    check_attempts_and_timeout(max_attempts, handler_timeout)
    check_task(task)


def _is_unicode_text(text: str) -> bool:
    """Whether *text* encodes as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
