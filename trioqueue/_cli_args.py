"""Argument types and checks of the command line; each error says what to type instead."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from ._backends.redis._url import url_problem
from ._pool import is_handler

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from ._backends.redis._backend import RedisBackend
    from ._backends.redis._sharded import ShardedBackend
    from ._pool import Handler

__all__ = [
    "QUEUE_ENV",
    "REDIS_URL_ENV",
    "SERVE_MAX_MEMORY_MIB",
    "NotThere",
    "UsageError",
    "add_queue_option",
    "add_redis_options",
    "add_redis_url_options",
    "add_shards_option",
    "load_handler",
    "non_negative",
    "non_negative_int",
    "port",
    "positive_int",
    "printable",
    "rate",
    "redis_backend",
    "redis_url",
    "resolve_queue",
    "resolve_redis_url",
    "seconds",
]

QUEUE_ENV: Final = "TRIOQUEUE_QUEUE"
"""The environment variable a Redis command takes its queue from when ``--queue`` is not given."""

REDIS_URL_ENV: Final = "TRIOQUEUE_REDIS_URL"
"""The environment variable a Redis command takes its URL from, after ``--redis-url-file``."""

SERVE_MAX_MEMORY_MIB: Final = 256
"""MiB of jobs and records ``trioqueue serve`` holds in memory unless ``--max-memory``."""

# C0 and C1 controls, DEL, the line and paragraph separators and the bidirectional
# overrides: each shown as Python writes it in a string, e.g. \x1b, \n, \u202e
_ESCAPES: Final = {
    code: repr(chr(code))[1:-1]
    for code in (
        *range(0x20),
        *range(0x7F, 0xA0),
        0x2028,
        0x2029,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
}


class UsageError(Exception):
    """Bad input on the command line: reported in one line, exit status 2."""


class NotThere(Exception):
    """What the command names (a queue) is not there: reported in one line, exit status 1."""


def printable(text: object) -> str:
    r"""*text* safe to print on a terminal: controls escaped as in Python (``\x1b``, ``\n``).

    C0 and C1 control characters, DEL, the Unicode line separators and the
    bidirectional overrides are escaped, so a job id, reason or error message
    cannot move the cursor, clear the screen or forge a line of output; every
    other character, Unicode included, is printed as it is.
    """
    return str(text).translate(_ESCAPES)


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


def bind_address(text: str) -> str:
    """``HOST:PORT`` (``[IPv6]:PORT`` for an IPv6 address), the port 1 to 65535."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT; e.g. 127.0.0.1:8000, or [::1]:8000 for IPv6"
        )
    bare = host.removeprefix("[").removesuffix("]")
    if ":" in bare and not (host.startswith("[") and host.endswith("]")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: put an IPv6 address in brackets, e.g. [{bare}]:{port}"
        )
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: the port must be a number from 1 to 65535")
    return text


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
    """A Redis URL: redis://, rediss:// or unix://, with a valid port and database.

    The error never echoes *text*: a URL that does not parse may hold a
    password where no redaction can find it.
    """
    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"not a Redis URL: {problem}")
    return text


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: use 1 to 65535")
    return value


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


def redis_backend(args: argparse.Namespace) -> RedisBackend | ShardedBackend:
    """The backend that the URL (see `resolve_redis_url`), ``--queue`` and the rest name.

    With ``--shards K``, the logical queue ``--queue`` over K shard queues.

    Raises:
        UsageError: The Redis extra is not installed; the message names it.
        ConfigurationError: An option is out of range; the message names it.
    """
    try:  # lazily: the optional extra
        from ._backends.redis._backend import RedisBackend
        from ._backends.redis._sharded import ShardedBackend
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    options = {
        "capacity": args.capacity,
        "min_idle": args.min_idle,
        "reliable": False if args.simple else None,  # None: the queue's own mode
        "key_ttl": args.key_ttl,
        "max_deliveries": getattr(args, "max_deliveries", 20),
    }
    if getattr(args, "stream", None) is not None:
        del options["capacity"]  # a stream has none
        return RedisBackend(
            args.redis,
            stream=args.stream,
            group=args.group,
            consumer=args.consumer,
            delete_done=args.delete_done,
            **options,
        )
    if args.shards is not None:
        return ShardedBackend.on_redis(args.redis, queue=args.queue, shards=args.shards, **options)
    return RedisBackend(args.redis, queue=args.queue, **options)


def add_redis_url_options(parser: argparse.ArgumentParser, *, environment: bool = True) -> None:
    """``--redis URL`` and ``--redis-url-file PATH``; with *environment*, `REDIS_URL_ENV` too.

    `resolve_redis_url` picks the one to use once the arguments are parsed.
    """
    sources = "--redis, then --redis-url-file" + (f", then ${REDIS_URL_ENV}" if environment else "")
    parser.add_argument(
        "--redis",
        metavar="URL",
        type=redis_url,
        help="redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss://... for TLS (the "
        "certificate's host name is checked unless ?ssl_check_hostname=false), or "
        "unix:///PATH; percent-encode special characters of the password. A password given "
        "here shows in `ps`: prefer --redis-url-file"
        + (f" or ${REDIS_URL_ENV}" if environment else "")
        + f". The first given is used: {sources}",
    )
    parser.add_argument(
        "--redis-url-file",
        metavar="PATH",
        help="read the Redis URL from this file (its one line), keeping the password off "
        "the command line; used when --redis is not given"
        + ("" if environment else f" (this command does not read ${REDIS_URL_ENV})"),
    )
    parser.set_defaults(redis_from_environment=environment)


def resolve_redis_url(args: argparse.Namespace, *, required: bool) -> None:
    """Set ``args.redis`` from ``--redis``, else ``--redis-url-file``, else `REDIS_URL_ENV`.

    Raises:
        UsageError: The file cannot be read or holds no URL, the URL found is not
            a Redis URL (not echoed), or, when *required*, no URL is given at all.
    """
    if args.redis is not None:
        return
    if args.redis_url_file is not None:
        where = f"the URL in --redis-url-file {args.redis_url_file}"
        text = _read_url_file(args.redis_url_file)
    elif args.redis_from_environment and os.environ.get(REDIS_URL_ENV):
        where = f"${REDIS_URL_ENV}"
        text = os.environ[REDIS_URL_ENV].strip()
    elif required:
        raise UsageError(
            f"no Redis URL: give --redis URL, --redis-url-file PATH (a file holding it) "
            f"or set {REDIS_URL_ENV}, e.g. --redis redis://localhost:6379/0"
        )
    else:
        return
    problem = url_problem(text)
    if problem is not None:
        raise UsageError(f"{where} is not a Redis URL: {problem}")
    args.redis = text


def resolve_queue(args: argparse.Namespace) -> None:
    """Set ``args.queue`` from ``--queue``, else `QUEUE_ENV`; or from ``--stream`` and ``--group``.

    A stream's group keeps its records under ``<stream>:<group>``, which is then
    ``args.queue``: the name the commands show and the metrics' ``queue`` label.

    Raises:
        UsageError: Neither names a queue, or a stream is named by halves or
            beside a queue.
    """
    stream, group = getattr(args, "stream", None), getattr(args, "group", None)
    if stream is not None or group is not None:
        _check_stream_options(args, stream, group)
        args.queue = f"{stream}:{group}"
        return
    if args.queue is not None:
        return
    name = os.environ.get(QUEUE_ENV, "").strip()
    if not name:
        raise UsageError(f"no queue: give --queue NAME or set {QUEUE_ENV}, e.g. --queue '{{mail}}'")
    args.queue = name


def _check_stream_options(args: argparse.Namespace, stream: str | None, group: str | None) -> None:
    """Refuse a stream named by halves, or beside a queue, shards or a capacity."""
    if stream is None or group is None:
        given, missing = ("--stream", "--group") if group is None else ("--group", "--stream")
        raise UsageError(
            f"{given} needs {missing} too: a stream is read through a consumer group, e.g. "
            "--stream '{uploads}' --group thumbnailer"
        )
    for option, value in (
        ("--queue", args.queue),
        ("--shards", args.shards),
        ("--capacity", args.capacity),
    ):
        if value is not None:
            raise UsageError(
                f"{option} with --stream: a stream source is not a list queue (it has no "
                f"capacity and is not sharded); give either --stream and --group or {option}"
            )
    if args.simple:
        raise UsageError(
            "--simple with --stream: a stream's pending entries are always delivered again "
            "(at-least-once); leave --simple out"
        )


def _read_url_file(path: str) -> str:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(
            f"--redis-url-file {path}: cannot read it ({exc.strerror or exc}); give the path "
            "of a file that holds the Redis URL"
        ) from None
    except UnicodeDecodeError:
        raise UsageError(
            f"--redis-url-file {path} is not UTF-8 text: write the Redis URL in it, "
            "percent-encoding special characters of the password"
        ) from None
    urls = [line.strip() for line in lines if line.strip()]
    if len(urls) != 1:
        raise UsageError(
            f"--redis-url-file {path} holds {'no line' if not urls else f'{len(urls)} lines'}: "
            "write the Redis URL alone in it, e.g. redis://:PASSWORD@localhost:6379/0"
        )
    return urls[0]


def add_queue_option(parser: argparse.ArgumentParser) -> None:
    """``--queue NAME``, defaulting to `QUEUE_ENV` (see `resolve_queue`)."""
    parser.add_argument(
        "--queue",
        metavar="NAME",
        help=f"the queue's key, e.g. 'mail'; on a Redis Cluster with a hash tag, "
        f"'{{mail}}' (default: ${QUEUE_ENV})",
    )


def add_shards_option(parser: argparse.ArgumentParser) -> None:
    """``--shards K``: the queue is a logical one over K shard queues (see `ShardedBackend`)."""
    parser.add_argument(
        "--shards",
        type=positive_int,
        metavar="K",
        help="the queue is one logical queue spread over K shard queues {NAME:0} ... "
        "{NAME:K-1} (on a Redis Cluster, over several nodes); give the same K to every "
        "command and worker that uses it (default: one queue, not sharded)",
    )


def add_redis_options(parser: argparse.ArgumentParser) -> None:
    """The URL options, ``--queue NAME`` and the queue's settings, for every Redis command."""
    add_redis_url_options(parser)
    add_queue_option(parser)
    parser.add_argument(
        "--capacity",
        type=positive_int,
        help="most jobs on the ready list (default: the queue's own; a new queue gets 1000)",
    )
    add_shards_option(parser)
    stream = parser.add_argument_group(
        "stream source", "read a Redis stream through a consumer group instead of a list queue"
    )
    stream.add_argument(
        "--stream",
        metavar="KEY",
        help="the stream's key; with --group, instead of --queue (the group's records are "
        "kept under KEY:GROUP); entries other programs XADD are jobs",
    )
    stream.add_argument("--group", metavar="NAME", help="the consumer group (made if missing)")
    stream.add_argument(
        "--consumer",
        metavar="NAME",
        help="this process's consumer name in the group (default: one of its own)",
    )
    stream.add_argument(
        "--delete-done",
        action="store_true",
        help="delete a finished job's entry (XDEL) as well as acknowledging it",
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
        default=None,
        help="a simple, at-most-once queue (default: the queue's own mode; a new queue is "
        "reliable: at-least-once)",
    )
    parser.add_argument(
        "--key-ttl",
        type=seconds,
        help="seconds an unfed queue lives (default: the queue's own; a new queue lives for ever)",
    )
