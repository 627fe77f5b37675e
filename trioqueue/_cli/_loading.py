"""Loading a user's handler or lifespan from ``MODULE:NAME``, with errors that say what to fix."""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from .._pool._handlers import is_handler

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from .._pool._handlers import Handler
from ._types import UsageError

__all__ = ["load_handler", "load_lifespan"]


def load_handler(spec: str) -> Handler | Mapping[str, Handler]:
    """Import ``MODULE:HANDLER`` (the current directory last on the path) and check it is async.

    HANDLER may also name a dict of task names to async functions: a worker for
    several tasks (`trioqueue.dispatch`).

    The current directory goes at the end of ``sys.path``, so a file there can
    hold the handler but never shadows a module installed under the same name
    (prometheus_client, trio, ...) that is imported later.

    Raises:
        UsageError: The spec is malformed, the module or name is missing, or the
            handler is not an ``async def``; the message says which.
    """
    target = _load(spec)
    if isinstance(target, Mapping) and target:
        wrong = [
            name for name, h in target.items() if not isinstance(name, str) or not is_handler(h)
        ]
        if wrong:
            raise UsageError(
                f"{spec} is a table of handlers, but {wrong[0]!r} does not name an async "
                "function; map each task name to an `async def handler(job)`"
            )
        return cast("Mapping[str, Handler]", target)
    if not is_handler(target):
        attr = spec.partition(":")[2]
        hint = " (or, if it is a lifespan yielding the handler, add --lifespan)"
        raise UsageError(
            f"{spec} is not an async function; define it as `async def {attr}(job): ...`"
            + (hint if callable(target) else "")
        )
    return cast("Handler", target)


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
