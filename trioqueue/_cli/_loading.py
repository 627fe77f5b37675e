"""Loading a user's handler or lifespan from ``MODULE:NAME``, with errors that say what to fix."""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .._exceptions import ConfigurationError
from .._pool._handlers import Tasks, is_handler
from .._task import Task

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from .._pool._handlers import Handlers
from ._types import UsageError

__all__ = ["checked_handlers", "is_runnable", "load_handler", "load_lifespan"]


def load_handler(spec: str) -> Handlers:
    """Import ``MODULE:HANDLER`` (the current directory last on the path) and check it.

    HANDLER names an async function, a `Task`, a list of tasks, or a dict of task
    names to async functions or tasks: a worker for several tasks.

    The current directory goes at the end of ``sys.path``, so a file there can
    hold the handler but never shadows a module installed under the same name
    (prometheus_client, trio, ...) that is imported later.

    Raises:
        UsageError: The spec is malformed, the module or name is missing, or the
            handler is not an ``async def`` (nor tasks); the message says which.
    """
    target = _load(spec)
    if not is_runnable(target):
        attr = spec.partition(":")[2]
        hint = " (or, if it is a lifespan yielding the handler, add --lifespan)"
        blocking = (
            ", or, to run a blocking function in a thread, decorate it with "
            "`@trioqueue.task(run_sync=True)`"
        )
        raise UsageError(
            f"{spec} is not an async function; define it as `async def {attr}(job): ...`"
            + (blocking + hint if callable(target) else "")
        )
    return checked_handlers(target, spec)


def is_runnable(target: object) -> bool:
    """Whether *target* is shaped like what a pool runs (`checked_handlers` checks it all)."""
    return isinstance(target, Mapping | list | tuple | Task) or is_handler(target)


def checked_handlers(target: object, spec: str) -> Handlers:
    """*target* if a pool can run it (a handler, tasks, a table); else UsageError naming *spec*."""
    try:
        Tasks(cast("Handlers", target))
    except (TypeError, ConfigurationError) as exc:
        what = str(exc).removeprefix("open_worker_pool: ")
        raise UsageError(f"{spec} cannot be run: {what}") from None
    return cast("Handlers", target)


def load_lifespan(spec: str) -> Callable[[], AbstractAsyncContextManager[object]]:
    """Import ``MODULE:LIFESPAN``: a function returning an async context manager.

    Raises:
        UsageError: As `load_handler` says, or the name is not callable.
    """
    target = _load(spec)
    if not callable(target) or is_handler(target):
        raise UsageError(
            f"{spec} is not a lifespan: with --lifespan, name a function that returns an async "
            "context manager yielding the handler (decorate it with "
            "contextlib.asynccontextmanager); without --lifespan, name the handler itself"
        )
    return cast("Callable[[], AbstractAsyncContextManager[object]]", target)


def _load(spec: str) -> object:
    """The object ``MODULE:NAME`` names (the current directory last on the path)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"{spec!r} is not MODULE:HANDLER; name the module and the async function in it, "
            "e.g. myapp.jobs:send_email"
        )
    if "" not in sys.path:
        sys.path.append("")  # modules in the current directory, after the installed ones
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any error in the module, reported with where it happened
        raise UsageError(_import_failure(module_name, exc)) from None
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(
                f"module {module_name!r} has no {attr!r}; check the name after the colon"
            ) from None
    return target


def _import_failure(module_name: str, exc: Exception) -> str:
    """Say why importing the handler's module failed, where, and what to do about it."""
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None:
        searched = module_name.split(".")
        if exc.name in {".".join(searched[: i + 1]) for i in range(len(searched))}:
            return (
                f"cannot find module {exc.name!r} (looked in the installed packages and the "
                "current directory); run from the directory that holds it or add that "
                "directory to PYTHONPATH"
            )
        top = exc.name.partition(".")[0]
        return (
            f"importing {module_name!r} failed{_where(exc)}: it imports {exc.name!r}, which is "
            f"not installed here; install the package that provides {top!r} in this "
            f"environment ({sys.executable} -m pip install ...)"
        )
    said = " ".join(str(exc).split())  # one line, whatever the exception's text holds
    return f"importing {module_name!r} raised {type(exc).__name__}{_where(exc)}: {said}; fix it"


def _where(exc: Exception) -> str:
    """`` at FILE, line N`` for the innermost frame of *exc* in a real file, or ``""``."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" at {_shown_path(exc.filename)}, line {exc.lineno}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<") and frame.filename != importlib.__file__
    ]
    if not frames:
        return ""
    return f" at {_shown_path(frames[-1].filename)}, line {frames[-1].lineno}"


def _shown_path(filename: str) -> str:
    """*filename* relative to the current directory when it lies under it."""
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return filename
