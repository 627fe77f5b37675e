"""One queue's connection to Redis: the client, its scripts, and what its errors mean.

Every script gets the queue's keys and the shared head of arguments (see
``lua/prelude.lua``); a reply that does not come within the I/O timeout, and any
connection error, becomes `BackendUnavailable`, whose message never shows the
password; a refusal over the queue's shared settings becomes `ConfigurationError`.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from typing import TYPE_CHECKING, Any, Final, final

import trio

from .._exceptions import (
    BackendOutOfMemory,
    BackendRefused,
    BackendUnavailable,
    ConfigurationError,
    TrioqueueError,
)
from .._records import ErrorInfo, JobRecord, JobState
from ._redis_scripts import load_sources

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ._redis_keys import RedisKeys

try:
    import coredis
    import coredis.exceptions
    from coredis.retry import NoRetryPolicy
    from coredis.tokens import PureToken
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    raise ImportError("the Redis backend needs coredis: pip install 'trioqueue[redis]'") from exc

__all__ = ["IO_TIMEOUT", "RedisConnection", "decode_record", "redacted", "text"]

IO_TIMEOUT: Final = 10.0
"""Longest wait, in seconds, for one reply from Redis."""

_UNREACHABLE: Final = (
    coredis.exceptions.ConnectionError,  # includes BusyLoadingError while a restart loads
    coredis.exceptions.ClusterDownError,
    coredis.exceptions.TryAgainError,
    OSError,
)


def text(value: bytes | str | None) -> str:
    """A reply as text ('' for nil)."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def redacted(url: str) -> str:
    """*url* without its password: ``redis://user:***@host:port/db``."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:" if parts.username else ":"
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}***@{host}"))


def decode_record(job_id: str, fields: dict[bytes, bytes]) -> JobRecord:
    """A job's record hash as a `JobRecord`."""

    def get(name: str) -> str:
        return text(fields.get(name.encode()))

    error = ErrorInfo(type=get("et"), message=get("em")) if get("et") else None
    raw = fields[b"p"]
    try:
        payload: Any = json.loads(raw)
    except ValueError:  # a dead letter that never decoded: keep its bytes
        payload = raw
    return JobRecord(
        id=job_id,
        payload=payload,
        payload_hash=get("h"),
        state=JobState(get("s")),
        attempts=int(get("a") or 0),
        queued=get("q") == "1",
        created_at=float(get("c") or 0),
        updated_at=float(get("u") or get("c") or 0),
        last_error=error,
        reason=get("w") or None,
    )


@final
class RedisConnection:
    """The client of one queue, opened and closed by its backend.

    Args:
        url: ``redis://host:port/db``.
        keys: The queue's keys, passed to every script in the prelude's order.
        head: Returns the shared head of arguments for each script call.
    """

    def __init__(
        self, url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
    ) -> None:
        self._url = url
        self.where = redacted(url)
        """The URL without its password: for messages and logs."""
        self._keys = keys
        self._head = head
        self._key_list = [
            keys.ready,
            keys.processing,
            keys.claims,
            keys.dead,
            keys.unqueued,
            keys.finished,
            keys.stats,
            keys.sequence,
            keys.config,
            keys.suspects,
        ]
        self._client: coredis.Redis[bytes] | None = None
        self._scripts: dict[str, Any] = {}
        self._exit: contextlib.AsyncExitStack | None = None

    async def open(self) -> None:
        """Create the client and register the scripts (connecting happens on first use)."""
        # no silent re-sends: a script whose reply was lost may have run, and the pool
        # decides what to do about that, not the client
        client: coredis.Redis[bytes] = coredis.Redis.from_url(
            self._url, decode_responses=False, retry_policy=NoRetryPolicy()
        )
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(client)
        self._client = client
        self._scripts = {name: client.register_script(src) for name, src in load_sources().items()}
        self._exit = stack

    async def close(self) -> None:
        """Close the client."""
        stack, self._exit, self._client = self._exit, None, None
        if stack is not None:
            await stack.aclose()

    @property
    def client(self) -> coredis.Redis[bytes]:
        """The open client.

        Raises:
            TrioqueueError: The backend is not open.
        """
        if self._client is None:
            raise TrioqueueError(
                "the RedisBackend is not connected: use it as `async with backend:` "
                "around the pools and queues that use it"
            )
        return self._client

    @contextlib.contextmanager
    def reachable(self) -> Iterator[None]:
        """Turn the client's connection errors into `BackendUnavailable`."""
        try:
            yield
        except BackendUnavailable:
            raise  # already ours (a refusal is a ConnectionError too)
        except _UNREACHABLE as exc:
            detail = (str(exc) or type(exc).__name__).replace(self._url, self.where)
            raise BackendUnavailable(self.where, detail) from exc

    async def blmove(self, source: str, destination: str, block: float) -> bytes | None:
        """``BLMOVE source destination RIGHT LEFT block``, cancellable at once.

        The command holds a connection of its own. When the caller is cancelled, a
        ``CLIENT UNBLOCK`` from another connection ends the wait on the server, and
        an element that was moved before it landed is put back at the front of
        *source* (the ``unmove`` script), so a cancelled wait neither strands a job
        nor loses its turn.

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """
        pool = self.client.connection_pool
        with self.reachable():
            async with pool.acquire() as connection:
                request = connection.create_request(
                    b"BLMOVE", source, destination, b"RIGHT", b"LEFT", block,
                    raise_exceptions=False,
                )  # fmt: skip
                try:
                    reply = await request
                except trio.Cancelled:
                    deadline = trio.current_time() + IO_TIMEOUT
                    with trio.CancelScope(shield=True, deadline=deadline):
                        if connection.client_id is not None:
                            await self.client.client_unblock(
                                connection.client_id, PureToken.TIMEOUT
                            )
                        element = await request
                        if isinstance(element, bytes):
                            await self.run("unmove", element)
                    raise
        if isinstance(reply, coredis.exceptions.ResponseError):
            if not str(reply).startswith("OOM"):
                raise await self._refusal("BLMOVE", reply)
            # a full Redis refuses BLMOVE (the claim script is allowed: it found nothing
            # just now, and no job can be added while Redis is full): wait, then look again
            await trio.sleep(block)
            return None
        assert reply is None or isinstance(reply, bytes)
        return reply

    async def _refusal(self, name: str, exc: Exception) -> BackendRefused:
        """What a script's error reply means, as the error to raise."""
        message = str(exc)
        if message.startswith("OOM"):  # refused before it ran (see _redis_scripts.FLAGS)
            limit = "unknown"
            with contextlib.suppress(Exception), trio.move_on_after(1):
                reply = await self.client.config_get(["maxmemory"])
                limit = f"{int(reply.get(b'maxmemory', b'0') or 0) // 1024} KiB"
            return BackendOutOfMemory(self.where, limit)
        return BackendRefused(
            self.where,
            f"Redis at {self.where} refused {name}: {message}. A worker pool "
            "retries; if this goes on, a key of the queue may have been changed by hand "
            f"(the queue's keys start with {self._keys.ready!r})",
        )

    async def run(self, name: str, *args: str | bytes | float) -> Any:
        """Run script *name* with the shared head and *args*; its reply.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time
                (then the script may or may not have run).
            ConfigurationError: The queue was set up with other shared settings.
        """
        self.client  # noqa: B018 - raises unless open
        script = self._scripts[name]
        # A script that was sent may have run even if its reply never came back: once
        # sent, wait for the reply (bounded), so a cancellation never hides a change.
        deadline = trio.current_time() + IO_TIMEOUT
        with trio.CancelScope(shield=True, deadline=deadline), self.reachable():
            try:
                return await script(keys=self._key_list, args=[*self._head(), *args])
            except coredis.exceptions.ResponseError as exc:
                _, marker, detail = str(exc).partition("TRIOQUEUE_CONFIG ")
                if not marker:
                    raise await self._refusal(f"the {name} script", exc) from exc
                keys = self._keys
                raise ConfigurationError(
                    f"queue {keys.ready!r} is set up with {detail} by the processes already "
                    "using it; every user of a queue must give it the same capacity, mode "
                    "(reliable or simple) and key_ttl. Pass the same, or, to change them, stop "
                    f"every user of the queue and delete the key {keys.config!r}"
                ) from None
        raise BackendUnavailable(  # the shield's deadline passed: the outcome is unknown
            self.where, f"no reply to the {name} script within {IO_TIMEOUT}s"
        )
