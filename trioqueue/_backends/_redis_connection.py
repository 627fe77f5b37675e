"""One queue's connection to Redis: the client, its scripts, and what its errors mean.

Every script gets the queue's keys and the shared head of arguments (see
``lua/prelude.lua``); a reply that does not come within the I/O timeout, and any
connection error, becomes `BackendUnavailable`, whose message never shows the
password; a script refused by the server becomes `BackendRefused`.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, final

import trio

from .._exceptions import (
    BackendOutOfMemory,
    BackendRefused,
    BackendUnavailable,
    TrioqueueError,
)
from .._payload import decode_payload
from .._records import ErrorInfo, JobRecord, JobState
from ._redis_scripts import load_sources
from ._redis_url import (
    CredentialsRefused,
    check_url,
    client_url,
    failure_detail,
    redacted,
    scrubbed,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ._redis_keys import RedisKeys

try:
    import coredis
    import coredis.exceptions
    from coredis.retry import NoRetryPolicy
    from coredis.tokens import PureToken
except ImportError as exc:  # pragma: no cover - exercised without the extra only
    _MISSING = "the Redis backend needs coredis: pip install 'trioqueue[redis]'"
    raise ImportError(f"{_MISSING} (in a checkout: pip install '.[redis]')") from exc

__all__ = [
    "IO_TIMEOUT",
    "ConnectionBase",
    "RedisConnection",
    "decode_record",
    "log_unblock_refused",
    "redacted",
    "text",
]

logger = logging.getLogger("trioqueue.redis")

ClientT = TypeVar("ClientT")

IO_TIMEOUT: Final = 10.0
"""Longest wait, in seconds, for one reply from Redis."""

_UNREACHABLE: Final = (
    coredis.exceptions.ConnectionError,  # includes BusyLoadingError while a restart loads
    coredis.exceptions.ClusterDownError,
    coredis.exceptions.TryAgainError,
    OSError,
)


def text(value: bytes | str | None, errors: str = "strict") -> str:
    """A reply as text ('' for nil)."""
    if value is None:
        return ""
    return value.decode(errors=errors) if isinstance(value, bytes) else value


def decode_record(job_id: str, fields: dict[bytes, bytes]) -> JobRecord:
    """A job's record hash as a `JobRecord`; never raises, whatever the hash holds.

    A payload that does not decode (another client's bytes, nesting too deep) is
    kept as its raw bytes; a state trioqueue never writes (a record changed by hand)
    reads as FAILED, with the stored value in `JobRecord.reason`.
    """

    def get(name: str) -> str:
        return text(fields.get(name.encode()), errors="backslashreplace")

    def number(name: str, fallback: str = "") -> float:
        try:
            return float(get(name) or get(fallback) or 0)
        except ValueError:
            return 0.0

    error = ErrorInfo(type=get("et"), message=get("em"), traceback=get("tb")) if get("et") else None
    raw = fields.get(b"p")
    payload: Any = None
    if raw is not None:
        try:
            payload = decode_payload(raw)
        except ValueError:  # a dead letter that never decoded: keep its bytes
            payload = raw
    reason = get("w") or None
    try:
        state = JobState(get("s"))
    except ValueError:
        state = JobState.FAILED
        reason = f"its record holds state {get('s')!r}, which trioqueue never writes: {reason}"
    return JobRecord(
        id=job_id,
        payload=payload,
        payload_hash=get("h"),
        state=state,
        attempts=int(number("a")),
        queued=get("q") == "1",
        created_at=number("c"),
        updated_at=number("u", "c"),
        last_error=error,
        reason=reason,
    )


def log_unblock_refused(exc: Exception) -> None:
    """Say that a wait could not be ended at once, and what permission it needs."""
    logger.warning(
        "could not end a wait for jobs at once (%s); give the Redis user "
        "+client|unblock (see the README's ACL)",
        exc,
    )


_OOM: Final = re.compile(r"(?:^|\W)OOM\b")  # a write refused for want of memory
_KEY_REFUSAL: Final = re.compile(r"TRIOQUEUE_KEY:? (?P<detail>.*)", re.DOTALL)  # prelude.lua


class ConnectionBase(Generic[ClientT]):
    """What the connections on either client share: the URL, the keys, the refusals.

    Args:
        url: ``redis://host:port/db``.
        keys: The queue's keys, passed to every script in the prelude's order.
        head: Returns the shared head of arguments for each script call.
    """

    def __init__(
        self, url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
    ) -> None:
        check_url(url)
        self._url = url
        self.where = redacted(url)
        """The URL without its password: for messages and logs."""
        self._keys = keys
        self._head = head
        self._key_list = keys.script_keys()
        self._client: ClientT | None = None

    @property
    def client(self) -> ClientT:
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

    async def _maxmemory(self) -> int:
        """The server's ``maxmemory`` in bytes (0: no limit)."""
        raise NotImplementedError

    async def _refusal(self, name: str, exc: Exception) -> BackendRefused:
        """What an error reply to *name* (a script, a command) means, as the error to raise."""
        message = scrubbed(str(exc), self._url)
        if _OOM.search(message):  # refused before it ran (see _redis_scripts.FLAGS)
            limit = "unknown"
            with contextlib.suppress(Exception), trio.move_on_after(1):
                limit = f"{await self._maxmemory() // 1024} KiB"
            return BackendOutOfMemory(self.where, limit)
        found = _KEY_REFUSAL.search(message)
        if found:  # refused before it wrote anything (see lua/prelude.lua)
            return BackendRefused(
                self.where,
                f"Redis at {self.where} refused {name}: the key {found['detail']}. It was "
                "changed by hand: restore it, or rename it out of the way (the queue starts "
                "that key afresh); a worker pool retries meanwhile",
            )
        return BackendRefused(
            self.where,
            f"Redis at {self.where} refused {name}: {message}. A worker pool "
            "retries; if this goes on, a key of the queue may have been changed by hand "
            f"(the queue's keys start with {self._keys.ready!r})",
        )


@final
class RedisConnection(ConnectionBase["coredis.Redis[bytes]"]):
    """The coredis client of one queue, opened and closed by its backend (see `ConnectionBase`)."""

    def __init__(
        self, url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
    ) -> None:
        super().__init__(url, keys, head)
        self._scripts: dict[str, Any] = {}
        self._exit: contextlib.AsyncExitStack | None = None

    async def open(self) -> None:
        """Create the client and register the scripts (connecting happens on first use)."""
        # no silent re-sends: a script whose reply was lost may have run, and the pool
        # decides what to do about that, not the client
        client: coredis.Redis[bytes] = coredis.Redis.from_url(
            client_url(self._url),  # rediss:// checks the certificate's host name
            decode_responses=False,
            retry_policy=NoRetryPolicy(),
            decode_components=True,  # a percent-encoded password means the decoded one
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

    async def hash(self, key: str) -> dict[bytes, bytes]:
        """``HGETALL key``: the fields of one hash, empty when there is none.

        Raises:
            BackendUnavailable: Redis cannot be reached.
        """
        with self.reachable():
            return await self.client.hgetall(key)

    async def hashes(self, keys: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The fields of many hashes, in one round trip (a pipeline)."""
        with self.reachable():
            async with self.client.pipeline(transaction=False) as pipe:
                reads = [pipe.hgetall(key) for key in keys]
            return [await read for read in reads]

    async def list_items(self, key: str) -> list[bytes]:
        """``LRANGE key 0 -1``: every element of a list, head first."""
        with self.reachable():
            return list(await self.client.lrange(key, 0, -1))

    async def exists(self, *keys: str) -> int:
        """``EXISTS``: how many of *keys* exist."""
        with self.reachable():
            return await self.client.exists(list(keys))

    @contextlib.contextmanager
    def reachable(self) -> Iterator[None]:
        """Turn the client's connection errors into `BackendUnavailable`.

        Refused credentials become `CredentialsRefused` (a `BackendUnavailable`
        too): a password changed under a running worker is an outage it waits out.
        """
        try:
            yield
        except coredis.exceptions.AuthenticationError as exc:
            raise CredentialsRefused(self.where, scrubbed(str(exc), self._url)) from exc
        except BackendUnavailable as exc:
            refused = exc.__cause__  # a script's refusal: the handshake may have failed
            if isinstance(refused, coredis.exceptions.AuthenticationError):
                detail = scrubbed(str(refused), self._url)
                raise CredentialsRefused(self.where, detail) from refused
            raise  # already ours (a refusal is a ConnectionError too)
        except _UNREACHABLE as exc:
            raise BackendUnavailable(self.where, failure_detail(exc, self._url)) from exc

    async def blmove(self, source: str, destination: str, block: float) -> bytes | None:
        """``BLMOVE source destination RIGHT LEFT block``, cancellable at once.

        The command holds a connection of its own. When the caller is cancelled, a
        ``CLIENT UNBLOCK`` from another connection ends the wait on the server, and
        an element that was moved before it landed is put back (the ``unmove``
        script: the front of *source*, or first among the stored jobs when producers
        filled the room it left), so a cancelled wait neither strands a job nor
        overfills the queue.

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
                    if isinstance(reply, Exception) and not isinstance(
                        reply, coredis.exceptions.ResponseError
                    ):
                        raise reply  # a lost connection: reachable() says what it means
                except trio.Cancelled:
                    deadline = trio.current_time() + IO_TIMEOUT
                    with trio.CancelScope(shield=True, deadline=deadline):
                        if connection.client_id is not None:
                            await self.unblock(connection.client_id)
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

    async def unblock(self, client_id: int) -> bool:
        """End the blocking wait of connection *client_id*; whether one was waiting.

        A refusal (e.g. NOPERM) is logged: the wait then ends by its own timeout.
        """
        try:
            return bool(await self.client.client_unblock(client_id, PureToken.TIMEOUT))
        except coredis.exceptions.ResponseError as exc:
            log_unblock_refused(exc)
            return False

    async def _maxmemory(self) -> int:
        reply = await self.client.config_get(["maxmemory"])
        return int(reply.get(b"maxmemory", b"0") or 0)

    async def run(self, name: str, *args: str | bytes | float) -> Any:
        """Run script *name* with the shared head and *args*; its reply.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time
                (then the script may or may not have run).
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
                raise await self._refusal(f"the {name} script", exc) from exc
        raise BackendUnavailable(  # the shield's deadline passed: the outcome is unknown
            self.where, f"no reply to the {name} script within {IO_TIMEOUT}s"
        )
