"""One queue's connection to Redis through coredis (see `ConnectionBase`).

coredis is pure Python on anyio: the client for platforms valkey-glide has no
build for (Windows) and for a TLS set-up that needs the certificate's host-name
check off alone (``?ssl_check_hostname=false``), which glide cannot do. Chosen with
``TRIOQUEUE_REDIS_CLIENT=coredis``, or when glide is not installed.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final, final

import coredis
import coredis.exceptions
import trio
from coredis.retry import NoRetryPolicy
from coredis.tokens import PureToken

from ..._exceptions import BackendUnavailable, ConfigurationError
from ._connection import (
    IO_TIMEOUT,
    WAIT_NEEDS_GLIDE,
    ConnectionBase,
    log_unblock_refused,
    user_refusal,
)
from ._scripts import load_sources
from ._url import (
    CredentialsRefused,
    client_url,
    failure_detail,
    scrubbed,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator, Sequence

    from ._keys import RedisKeys

__all__ = ["CoredisConnection"]

_UNREACHABLE: Final = (
    coredis.exceptions.ConnectionError,  # includes BusyLoadingError while a restart loads
    coredis.exceptions.ClusterDownError,
    coredis.exceptions.TryAgainError,
    OSError,
)


@final
class CoredisConnection(ConnectionBase["coredis.Redis[bytes]"]):
    """The coredis client of one queue, opened and closed by its backend (see `ConnectionBase`)."""

    def __init__(
        self, url: str, keys: RedisKeys, head: Callable[[], Sequence[str | bytes | float]]
    ) -> None:
        super().__init__(url, keys, head)
        self._one_server_only("coredis")
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

    async def command(self, *args: str | bytes | float) -> Any:
        """One command of the user's: its reply as coredis's connection gives it.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time.
            BackendRefused: The server refused the command (its message).
        """
        try:
            with self.reachable(), trio.fail_after(IO_TIMEOUT):
                async with self.client.connection_pool.acquire() as connection:
                    reply = await connection.create_request(*args, raise_exceptions=False)
        except trio.TooSlowError:
            raise BackendUnavailable(self.where, f"no reply within {IO_TIMEOUT:g} s") from None
        if isinstance(reply, coredis.exceptions.ResponseError):
            raise user_refusal(self.where, args, scrubbed(str(reply), self._url)) from reply
        if isinstance(reply, Exception):
            with self.reachable():
                raise reply
        return reply

    async def hash(self, key: str) -> dict[bytes, bytes]:
        """``HGETALL key``: the fields of one hash, empty when there is none.

        Raises:
            BackendUnavailable: Redis cannot be reached.
            BackendRefused: The server refused it (the key changed by hand).
        """
        async with self._refused("HGETALL"):
            return await self.client.hgetall(key)

    async def hashes(self, keys: Sequence[str]) -> list[dict[bytes, bytes]]:
        """The fields of many hashes, in one round trip (a pipeline)."""
        async with self._refused("HGETALL"):
            async with self.client.pipeline(transaction=False) as pipe:
                reads = [pipe.hgetall(key) for key in keys]
            return [await read for read in reads]

    async def list_items(self, key: str, start: int = 0, stop: int = -1) -> list[bytes]:
        """``LRANGE key start stop``: by default every element of a list, head first."""
        async with self._refused("LRANGE"):
            return list(await self.client.lrange(key, start, stop))

    async def exists(self, *keys: str) -> int:
        """``EXISTS``: how many of *keys* exist."""
        async with self._refused("EXISTS"):
            return await self.client.exists(list(keys))

    @contextlib.asynccontextmanager
    async def _refused(self, name: str) -> AsyncIterator[None]:
        """`reachable`, and an error reply to command *name* as `BackendRefused`."""
        try:
            with self.reachable():
                yield
        except coredis.exceptions.ResponseError as exc:
            raise await self._refusal(name, exc) from exc

    async def wait_replicas(self, count: int, server_wait: float) -> int:
        """Not on coredis: its pool may send ``WAIT`` on another connection than the writes.

        Raises:
            ConfigurationError: Always (`RedisBackend` refuses *wait_replicas* first).
        """
        raise ConfigurationError(WAIT_NEEDS_GLIDE)

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

    async def _blocking(
        self, command: tuple[str | bytes | float, ...], block: float, undo: str | None = None
    ) -> Any:
        """Run the blocking *command* on a connection of its own, cancellable at once.

        When the caller is cancelled, a ``CLIENT UNBLOCK`` from another connection
        ends the wait on the server, and a reply that came all the same is given to
        script *undo*.
        """
        pool = self.client.connection_pool
        with self.reachable():
            async with pool.acquire() as connection:
                request = connection.create_request(*command, raise_exceptions=False)
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
                        late = await request
                        if undo is not None and isinstance(late, bytes):
                            await self.run(undo, late)
                    raise
        if isinstance(reply, coredis.exceptions.ResponseError):
            if not str(reply).startswith("OOM"):
                raise await self._refusal(str(command[0]), reply)
            # a full Redis refuses BLMOVE (the claim script is allowed: it found nothing
            # just now, and no job can be added while Redis is full): wait, then look again
            await trio.sleep(block)
            return None
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

        A checkpoint: cancelled before it sends the script, it raises
        `trio.Cancelled` and changes nothing; once sent, it waits for the reply
        (at most the I/O timeout) so that a cancellation never hides a change.

        Raises:
            BackendUnavailable: Redis cannot be reached, or did not reply in time
                (then the script may or may not have run).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
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
