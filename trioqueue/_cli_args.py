"""Argument types and checks of the command line; each error says what to type instead."""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import urllib.parse
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ._backends._redis import RedisBackend
    from ._pool import Handler

__all__ = [
    "UsageError",
    "add_redis_options",
    "load_handler",
    "non_negative",
    "non_negative_int",
    "port",
    "positive_int",
    "rate",
    "redis_backend",
    "redis_url",
    "seconds",
]


class UsageError(Exception):
    """Bad input on the command line: reported in one line, exit status 2."""


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        fix = (
            "is negative: use 0 or more" if minimum == 0 else f"is too small: use {minimum} or more"
        )
        raise argparse.ArgumentTypeError(f"{value} {fix}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    return _whole_number(text, 1)


def rate(text: str) -> float:
    """A probability, 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is out of range: use 0 to 1")
    return value


def non_negative(text: str) -> float:
    """A finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: use 0 or more")
    if value == float("inf"):
        raise argparse.ArgumentTypeError("inf is not a number of seconds: use a finite one")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("0 is too small: use a number of seconds > 0")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    return _whole_number(text, 0)


def redis_url(text: str) -> str:
    """A Redis URL: redis://, rediss:// or unix://, with a valid port and database."""
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a Redis URL ({exc})") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Redis URL: use redis://host:port/db (or rediss://, unix://)"
        )
    database = parts.path.strip("/") if parts.scheme != "unix" else "0"
    if parts.scheme != "unix" and (not parts.hostname or (database and not database.isdigit())):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Redis URL: use redis://host:port/db, e.g. redis://localhost:6379/0"
        )
    return text


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: use 1 to 65535")
    return value


def load_handler(spec: str) -> Handler:
    """Import ``MODULE:HANDLER`` (the current directory first) and check it is async.

    Raises:
        UsageError: The spec is malformed, the module or name is missing, or the
            handler is not an ``async def``; the message says which.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(
            f"{spec!r} is not MODULE:HANDLER; name the module and the async function in it, "
            "e.g. myapp.jobs:send_email"
        )
    if "" not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the current directory
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            f"cannot import {module_name!r} ({exc}); run from the directory that holds it "
            "or add that directory to PYTHONPATH"
        ) from None
    except Exception as exc:  # any error in the module, reported
        raise UsageError(
            f"importing {module_name!r} raised {type(exc).__name__}: {exc}; fix the module"
        ) from None
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(
                f"module {module_name!r} has no {attr!r}; check the name after the colon"
            ) from None
    if not inspect.iscoroutinefunction(target) and not inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an instance with async __call__
    ):
        raise UsageError(
            f"{spec} is not an async function; define it as `async def {attr}(job): ...`"
        )
    return cast("Handler", target)


def redis_backend(args: argparse.Namespace) -> RedisBackend:
    """The `RedisBackend` that ``--redis``, ``--queue`` and their options describe.

    Raises:
        UsageError: The Redis extra is not installed; the message names it.
        ConfigurationError: An option is out of range or the queue needs a hash tag.
    """
    try:
        from ._backends._redis import RedisBackend  # lazily: the optional extra
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    return RedisBackend(
        args.redis,
        queue=args.queue,
        capacity=args.capacity,
        min_idle=args.min_idle,
        reliable=not args.simple,
        key_ttl=args.key_ttl,
        max_deliveries=getattr(args, "max_deliveries", 20),
    )


def add_redis_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--redis URL --queue NAME`` and the queue's settings, as every Redis command takes them."""
    parser.add_argument(
        "--redis", metavar="URL", type=redis_url, required=required, help="redis://host:port/db"
    )
    parser.add_argument(
        "--queue",
        metavar="NAME",
        required=required,
        help="the queue's key, with a hash tag: '{mail}'",
    )
    parser.add_argument(
        "--capacity", type=positive_int, default=1000, help="most jobs on the ready list"
    )
    parser.add_argument(
        "--min-idle",
        type=seconds,
        default=30.0,
        help="seconds a claim lasts without renewal (a crashed worker's jobs wait this long)",
    )
    parser.add_argument(
        "--simple",
        action="store_true",
        help="a simple, at-most-once queue (the default is reliable: at-least-once)",
    )
    parser.add_argument(
        "--key-ttl",
        type=seconds,
        default=None,
        help="seconds an unfed queue lives (as the queue was set up with; default: for ever)",
    )
