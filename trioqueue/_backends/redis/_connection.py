"""What one queue's connection to Redis means: its URL, its keys, what a refusal says.

A connection (`ConnectionBase`, made to talk in ``_hiredis.py``) runs the
queue's scripts and the few plain commands the backend needs: every script gets
the queue's keys and the shared head of arguments (see ``lua/prelude/``); a
reply that does not come within the I/O timeout, and any connection error,
becomes `BackendUnavailable`, whose message never shows the password; a script
refused by the server becomes `BackendRefused`. Also here: decoding a job's
record hash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
from typing import TYPE_CHECKING, Any, Final

import trio

from ..._exceptions import (
    BackendOutOfMemory,
    BackendRefused,
    BackendUnavailable,
    ConfigurationError,
    TrioqueueError,
)
from ..._payload import decode_payload
from ..._records import ErrorInfo, JobRecord, JobState
from ._url import check_url, redacted, scrubbed, wants_cluster
from ._url_parts import url_parts

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._keys import RedisKeys
    from ._resp_cluster import SlotPool
    from ._resp_pool import RespPool

__all__ = [
    "CREDENTIAL_WORDS",
    "IO_TIMEOUT",
    "TRANSIENT_REPLIES",
    "ConnectionBase",
    "decode_record",
    "is_redirect",
    "says_any",
    "text",
    "user_refusal",
]

logger = logging.getLogger("trioqueue.redis")

IO_TIMEOUT: Final = 10.0
"""Longest wait, in seconds, for one reply from Redis, unless the caller's I/O deadline
(`io_deadline`) is sooner."""

CREDENTIAL_WORDS: Final = (
    "WRONGPASS",
    "NOAUTH",
    "invalid password",
    "invalid username",
    "unauthenticated",  # Redis 7 refuses a long command from a client yet to authenticate
)
"""Words of an error that means the server refused the URL's credentials."""

TRANSIENT_REPLIES: Final = ("LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN")
"""Error replies that mean "not now" rather than "no": an outage, waited out."""


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
            value = float(get(name) or get(fallback) or 0)
        except ValueError:
            return 0.0
        return value if math.isfinite(value) else 0.0  # inf or nan: changed by hand

    error = None
    if get("et"):
        attempt = get("ea")
        error = ErrorInfo(
            type=get("et"),
            message=get("em"),
            traceback=get("tb"),
            attempt=int(attempt) if attempt.isdigit() else None,  # older records have none
        )
    raw = fields.get(b"p")
    payload: Any = None
    if raw is not None:
        try:
            payload = decode_payload(raw)
        except ValueError:  # a dead letter that never decoded: keep its bytes
            payload = raw
    reason = get("w") or None
    result: Any = None
    result_error = get("rerr") or None
    if (stored := fields.get(b"res")) is not None:
        try:
            result = decode_payload(stored)
        except ValueError as exc:  # changed by hand: say so, never raise
            result_error = f"its stored result is not JSON ({exc})"
    headers: dict[str, str] = {}
    try:
        stored_headers = json.loads(fields.get(b"o") or b"{}").get("m") or {}
        if isinstance(stored_headers, dict):
            headers = {str(k): str(v) for k, v in stored_headers.items()}
    except (ValueError, AttributeError, RecursionError):  # changed by hand: never raise
        pass
    progress: Any = None
    if (reported := fields.get(b"g")) is not None:
        try:
            progress = decode_payload(reported)
        except ValueError:  # changed by hand: never raise
            progress = None
    after: tuple[str, ...] = ()
    try:
        parents = json.loads(fields.get(b"dp") or b"[]")
        if isinstance(parents, list):
            after = tuple(str(parent) for parent in parents)
    except (ValueError, RecursionError):  # changed by hand: never raise
        pass
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
        due_at=number("due") if get("due") else None,
        result=result,
        result_error=result_error,
        priority=int(number("pr")),
        progress=progress,
        headers=headers,
        after=after,
        unique_key=get("uk") or None,
        rate_key=get("rk") or None,
    )


def says_any(message: str, words: Sequence[str]) -> bool:
    """Whether *message* holds one of *words*, in any case (clients reword the server's)."""
    folded = message.casefold()
    return any(word.casefold() in folded for word in words)


def user_refusal(where: str, command: Sequence[object], message: str) -> BackendRefused:
    """The error for a user's command (`RedisBackend.command`) that the server refused."""
    name = command[0].decode() if isinstance(command[0], bytes) else str(command[0])
    return BackendRefused(where, f"Redis at {where} refused {name.upper()}: {message}")


_REDIRECT: Final = re.compile(r"\b(?:MOVED|ASK) \d+ ")
_OOM: Final = re.compile(r"(?:^|\W)OOM\b")


def is_redirect(message: str) -> bool:
    """Whether an error message is a cluster's MOVED or ASK (the slot is served elsewhere)."""
    return _REDIRECT.search(message) is not None  # a write refused for want of memory


# the prelude's refusals (lua/prelude/1-queue.lua)
_KEY_REFUSAL: Final = re.compile(r"TRIOQUEUE_KEY:? (?P<detail>.*)", re.DOTALL)
_SOURCE_REFUSAL: Final = re.compile(r"TRIOQUEUE_SOURCE:? (?P<source>\w+)")


class ConnectionBase:
    """What a connection knows before it talks: the URL, the keys, what refusals mean.

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
        self._client: RespPool | SlotPool | None = None

    @property
    def client(self) -> RespPool | SlotPool:
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
        raise NotImplementedError  # the connection that talks (_hiredis.py) asks

    def _no_database(self, detail: str) -> ConfigurationError | None:
        """The error for a URL whose database the server does not have, if *detail* says so.

        Redis answers ``SELECT`` with "DB index is out of range".
        """
        if not says_any(detail, ("DB index is out of range",)):
            return None
        db = url_parts(self._url).db
        return ConfigurationError(
            f"Redis at {self.where} has no database {db} ({detail.strip()}): use a number "
            "below the server's `databases` setting"
        )

    async def _refusal(self, name: str, exc: Exception) -> BackendUnavailable | ConfigurationError:
        """What an error reply to *name* (a script, a command) means, as the error to raise.

        From a Redis Cluster, ``CROSSSLOT`` means a queue whose keys span slots, and
        ``MOVED`` a single-server client: each a `ConfigurationError` (a pool stops
        on it) that names the fix (the hash tag to use; ``?cluster=yes``).
        """
        message = scrubbed(str(exc), self._url)
        if no_database := self._no_database(message):
            return no_database
        if "crossslot" in message.lower():
            return ConfigurationError(
                self._keys.slot_problem()
                or f"Redis at {self.where} refused {name}: {message}"  # not the queue's keys
            )
        redirected = is_redirect(message)
        if redirected and not wants_cluster(self._url):  # (a cluster client follows them)
            return ConfigurationError(
                f"Redis at {self.where} is a Redis Cluster node, and queue "
                f"{self._keys.ready!r} lives on another node: add ?cluster=yes to the URL"
            )
        moving = redirected or says_any(message, TRANSIENT_REPLIES)
        if moving and not _KEY_REFUSAL.search(message):
            # a failover or a slot move under way: an outage the pool waits out, not a refusal
            return BackendUnavailable(
                self.where, f"{name} was answered {message!r}: the queue's slot is moving"
            )
        if _OOM.search(message):  # refused before it ran (see _redis_scripts.FLAGS)
            limit = "unknown"
            with contextlib.suppress(Exception), trio.move_on_after(1):
                limit = f"{await self._maxmemory() // 1024} KiB"
            return BackendOutOfMemory(self.where, limit)
        if found := _SOURCE_REFUSAL.search(message):
            return ConfigurationError(
                f"Redis at {self.where} refused {name}: the keys starting with "
                f"{self._keys.ready!r} belong to a {found['source']} source. A stream's "
                "group keeps its keys under '<stream>:<group>', the names a queue called "
                "that has too: give the queue or the group another name"
            )
        found = _KEY_REFUSAL.search(message)
        if found:  # refused before it wrote anything (see lua/prelude/)
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
