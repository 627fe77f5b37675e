"""The Redis options every Redis command shares (URL, queue, shards, stream) and their backend."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .._backends.redis._url import url_problem

if TYPE_CHECKING:
    from .._backends.redis._backend import RedisBackend
    from .._backends.redis._sharded import ShardedBackend
from ._types import UsageError, positive_int, seconds

__all__ = [
    "QUEUE_ENV",
    "REDIS_URL_ENV",
    "add_queue_option",
    "add_redis_options",
    "add_redis_url_options",
    "add_shards_option",
    "redis_backend",
    "redis_url",
    "resolve_queue",
    "resolve_redis_url",
]


QUEUE_ENV: Final = "TRIOQUEUE_QUEUE"
"""The environment variable a Redis command takes its queue from when ``--queue`` is not given."""


REDIS_URL_ENV: Final = "TRIOQUEUE_REDIS_URL"
"""The environment variable a Redis command takes its URL from, after ``--redis-url-file``."""


def redis_url(text: str) -> str:
    """A Redis URL: redis://, rediss:// or unix://, with a valid port and database.

    The error never echoes *text*: a URL that does not parse may hold a
    password where no redaction can find it.
    """
    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"not a Redis URL: {problem}")
    return text


def redis_backend(args: argparse.Namespace) -> RedisBackend | ShardedBackend:
    """The backend that the URL (see `resolve_redis_url`), ``--queue`` and the rest name.

    With ``--shards K``, the logical queue ``--queue`` over K shard queues.

    Raises:
        UsageError: The Redis extra is not installed; the message names it.
        ConfigurationError: An option is out of range; the message names it.
    """
    try:  # lazily: the optional extra
        from .._backends.redis._backend import RedisBackend
        from .._backends.redis._sharded import ShardedBackend
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
