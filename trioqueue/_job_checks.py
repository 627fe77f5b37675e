"""The checks of a job's options (task name, priority, attempts, timeout), one message each.

Shared by `prepare` (what a producer enqueues) and `Task` (a handler's defaults), so
each refuses the same value with the same words.
"""

from __future__ import annotations

import math

from ._payload import MAX_TASK_NAME, PRIORITIES
from ._util import MAX_DELAY

__all__ = ["check_attempts_and_timeout", "check_priority", "check_task"]


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
