"""The checks of a job's options (task name, priority, attempts, timeout), one message each.

Shared by `prepare` (what a producer enqueues) and `Task` (a handler's defaults), so
each refuses the same value with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ._payload import MAX_TASK_NAME, PRIORITIES
from ._util import MAX_DELAY

__all__ = [
    "MAX_AFTER",
    "MAX_HEADERS",
    "MAX_HEADERS_BYTES",
    "check_attempts_and_timeout",
    "check_headers",
    "check_priority",
    "check_task",
    "control_character",
]

MAX_AFTER = 100
"""The most jobs one job may run after (``enqueue(..., after=[...])``)."""
MAX_HEADERS = 64
"""The most headers a job may carry."""
MAX_HEADERS_BYTES = 8192
"""The most bytes a job's headers may take, names and values together (UTF-8)."""
_MAX_HEADER_NAME = 200


def check_task(task: str | None) -> None:
    """Check a job's task name; raise TypeError or ValueError."""
    if task is None:
        return
    if not isinstance(task, str):
        raise TypeError(
            f"task= takes the name of a handler (a str) or a trioqueue.Task, not "
            f"{type(task).__name__}"
        )
    if not 1 <= len(task) <= MAX_TASK_NAME or not task.isprintable():
        raise ValueError(
            f"task={task!r}: name the handler in 1 to {MAX_TASK_NAME} printable characters"
        )


def check_priority(priority: int) -> None:
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


def check_attempts_and_timeout(max_attempts: int | None, timeout: float | None) -> None:
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


def control_character(text: str) -> str | None:
    """The first control character of *text* (a line feed, ESC, NUL, DEL, ...), or None.

    A tab is not one: it is text in a header value, as HTTP has it.
    """
    for char in text:
        if (ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F:
            return char
    return None


def check_headers(headers: Any) -> dict[str, str] | None:
    """A job's headers as a dict of its own (None for none); raise TypeError or ValueError."""
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise TypeError(
            f"headers= takes a dict of str to str, not {type(headers).__name__}; e.g. "
            '{"tenant": "acme"}'
        )
    checked = dict(headers)
    if any(not isinstance(k, str) or not isinstance(v, str) for k, v in checked.items()):
        raise TypeError(
            "headers= takes a dict of str to str; convert other values to text (e.g. str(n))"
        )
    if len(checked) > MAX_HEADERS:
        raise ValueError(f"a job carries at most {MAX_HEADERS} headers, not {len(checked)}")
    for name in checked:
        if not 1 <= len(name) <= _MAX_HEADER_NAME or not name.isprintable():
            raise ValueError(
                f"header {name!r}: name it in 1 to {_MAX_HEADER_NAME} printable characters"
            )
    for name, value in checked.items():
        if (char := control_character(value)) is not None:
            raise ValueError(
                f"header {name!r}: its value holds the control character {char!r}; a header "
                "is one line of text (ids, trace context): put data in the payload"
            )
    try:
        size = sum(len(k.encode()) + len(v.encode()) for k, v in checked.items())
    except UnicodeEncodeError:
        raise ValueError("headers= holds a lone surrogate, which UTF-8 cannot store") from None
    if size > MAX_HEADERS_BYTES:
        raise ValueError(
            f"the headers take {size:,} bytes, over {MAX_HEADERS_BYTES:,} bytes: headers are "
            "for metadata (ids, trace context); put data in the payload"
        )
    return checked
