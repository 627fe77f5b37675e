"""The Redis backend's claims: taking jobs (or waiting in BLMOVE) and renewing leases."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import trio

from ..._backend_values import Claim, Renewal
from ..._exceptions import ConfigurationError
from ..._job_checks import check_headers
from ..._job_input import check_options
from ..._payload import decode_payload
from ..._records import Job
from ._connection import text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._stream import StreamSource

from ._base import TIMER_SLACK
from ._settling import Settling

__all__ = ["Claiming"]


def _until_due(block: float, due_in: bytes) -> float:
    """*block*, cut to *due_in* seconds (the claim script's next due time; empty for none).

    Never below a millisecond: a zero wait would be a wait for ever to BLMOVE.
    """
    if not due_in:
        return block
    return min(block, max(float(due_in), 0.001))


def _payload(value: bytes | None) -> Any:
    """A claimed job's payload, decoded.

    Raises:
        ValueError: It is missing, or not JSON trioqueue can hold (a record changed
            by hand, or another client's push); the message says which.
    """
    if value is None:
        raise ValueError("no payload (its payload field is missing)")
    try:
        return decode_payload(value)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def _options(value: bytes) -> tuple[int | None, float | None, str | None, dict[str, str]]:
    """A claimed job's max_attempts, handler_timeout, task and headers (`_options_argument`).

    Raises:
        ValueError: The field is not what trioqueue writes (a record changed by hand).
    """
    if not value:
        return None, None, None, {}
    try:
        options = json.loads(value)
    except (ValueError, RecursionError):
        raise ValueError("bad options (its options field is not JSON)") from None
    if not isinstance(options, dict):
        raise ValueError("bad options (its options field is not a JSON object)")
    found = options.get("a"), options.get("t"), options.get("n")
    try:
        check_options(*found)
        headers = check_headers(options.get("m")) or {}
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"bad options (its options field holds max_attempts {found[0]!r}, "
            f"handler_timeout {found[1]!r}, task {found[2]!r}, headers "
            f"{options.get('m')!r}: {exc})"
        ) from None
    return (*found, headers)


def _whole(value: bytes | None) -> int:
    """A count read from Redis; 0 if missing or not a number (a record changed by hand)."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _seconds_or_zero(value: bytes | None) -> float:
    """A time read from Redis; 0.0 if missing, not a number, or not finite."""
    try:
        seconds = float(value or 0)
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) else 0.0


def _check_attempts(value: bytes | None) -> None:
    """Raise ValueError naming the attempts field unless it is a whole number (as stored)."""
    if not (value or b"0").isdigit() or len(value or b"") > 9:
        raise ValueError(
            f"its attempts field is {text(value or b'')!r}, not a whole number of attempts"
        )


class Claiming(Settling):
    """RedisBackend methods: taking jobs (or waiting in BLMOVE) and renewing leases."""

    async def _claims(self, rows: list[list[bytes]]) -> list[Claim]:
        """Turn claimed rows into claims; dead-letter the ones Python cannot decode.

        Lua's cjson accepts a few things Python's json does not (``nan``, hex
        numbers, invalid UTF-8 in strings, nesting deeper than `MAX_DEPTH`); such
        a job must not crash the pool: it becomes a dead letter with the reason.
        """
        claims = []
        for job_id, payload, attempts, token, ready_at, suspect, options, priority in rows:
            job_attempt = _whole(attempts) + 1
            at = _seconds_or_zero(ready_at)
            try:
                _check_attempts(attempts)
                decoded = _payload(payload)
                max_attempts, timeout, task, headers = _options(options)
            except ValueError as exc:
                job = Job(id=text(job_id), payload=None, attempt=job_attempt)
                poison = Claim(job=job, token=text(token), ready_at=at)
                await self._settle(poison, "dead", None, f"undecodable record: {exc}")
                continue
            job = Job(
                id=text(job_id),
                payload=decoded,
                attempt=job_attempt,
                max_attempts=max_attempts,
                handler_timeout=timeout,
                task=task,
                priority=_whole(priority),
                headers=headers,
            )
            claims.append(Claim(job=job, token=text(token), ready_at=at, suspect=suspect == b"1"))
        return claims

    async def claim(self, max_jobs: int, *, lease: float, block: float) -> list[Claim]:
        """Claim up to *max_jobs* ready jobs, at most 100 a call; see `Backend.claim`.

        A paused queue claims nothing: the call waits out *block* and returns
        none, so a resumed queue is claimed from again within *block*. Under a
        queue rate limit the call takes no more than it allows, and waits within
        *block* for the next start it allows.

        One script claims at most 100 jobs, so a large claim never holds Redis
        for long; ask again for more. Blocks in ``BLMOVE`` for up to *block*
        seconds when the list is empty. A cancellation ends that wait at once,
        and a job it moved meanwhile goes back to the front of the queue: a
        claim is either registered or never made.

        A stream source claims jobs to deliver again first, then new entries;
        with none, it waits up to *block* seconds for a new entry or a job given
        back (``XREAD BLOCK`` on the stream and the group's wake stream, which
        takes nothing: a cancelled wait changes nothing), and claims again.
        """
        if not self._min_idle_given and self.redelivers:
            raise ConfigurationError(
                f"RedisBackend(queue={self._keys.ready!r}) claims from a reliable queue, "
                "whose claims go to a recovery set, and with a recovery set min_idle is "
                "required: give min_idle=SECONDS, how long a crashed worker's jobs wait "
                "before another worker takes them (trioqueue worker --min-idle defaults to 30)"
            )
        if self._stream is not None:
            return await self._claim_from_stream(self._stream, max_jobs, lease, block)
        ttl, limit = self._claim_limits()
        ready, processing = self._keys.ready, self._keys.processing
        deadline = trio.current_time() + block
        moved: tuple[bytes, ...] = ()
        while True:
            # A claim made must reach the caller: cancellable before the script is sent,
            # not after, nor when it registers what BLMOVE moved (that would sit unclaimed).
            if not moved:
                await trio.lowlevel.checkpoint_if_cancelled()
            with trio.CancelScope(shield=True):
                rows, due_in, *held_back = await self._run(
                    "claim", max_jobs, lease, ttl, limit, *moved
                )
                claims = await self._claims(rows)
            left = deadline - trio.current_time()
            if held_back == [b"paused"]:
                # what a BLMOVE moved went back; ask again when the block is over
                await trio.sleep(max(left, 0))
                return []
            if held_back:
                # the queue's rate limit allows no start yet: what a BLMOVE moved went
                # back; ask again when it allows one, within the block
                if left <= 0:
                    return []
                await trio.sleep(min(left, _seconds_or_zero(due_in)))
                moved = ()
                continue
            if claims or left <= 0:
                return claims
            # no longer than until the next delayed job is due: then it is claimable
            # (a delayed job enqueued meanwhile, due sooner, sends a wake element)
            wait = _until_due(left, due_in)
            # The server's timer ends an idle wait, Trio's deadline a moment later only
            # when it cannot (TIMER_SLACK). A due time is kept on this clock, and Redis
            # notices a BLMOVE's timeout only when its event loop wakes: Trio's deadline
            # ends that wait, by a cancellation, which puts back what it moved (blmove).
            server_wait, trio_wait = (left, wait) if due_in else (wait, wait + TIMER_SLACK)
            element = None
            with trio.move_on_after(trio_wait):
                element = await self._conn.blmove(ready, processing, server_wait)
            if element is None and not due_in:
                return []  # the block ran out, and nothing is stored to come due
            moved = () if element is None else (element,)

    def _claim_limits(self) -> tuple[float | str, int | str]:
        """The claim script's claims-set lifetime and delivery limit ('' for none)."""
        ttl = "" if self._recovery_ttl is None else self._recovery_ttl
        limit = "" if self._max_deliveries is None else self._max_deliveries
        return ttl, limit

    async def _claim_from_stream(
        self, source: StreamSource, max_jobs: int, lease: float, block: float
    ) -> list[Claim]:
        """`claim` for a stream source (see there)."""
        ttl, limit = self._claim_limits()
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):  # a claim made must reach the caller
            rows, after, woken, due_in, *held_back = await self._run(
                "claim", max_jobs, lease, ttl, limit
            )
            claims = await self._claims(rows)
        if held_back == [b"paused"]:
            await trio.sleep(block)  # ask again when the block is over
            return []
        if held_back:  # rate limited: ask again when the limit allows a start
            await trio.sleep(min(block, _seconds_or_zero(due_in)))
            return []
        if rows or block <= 0:  # rows that were all dead-lettered end the call too
            return claims
        block = _until_due(block, due_in)
        # as a list's wait (claim): Trio's deadline ends it at a due time, else the
        # server's timer does
        with trio.move_on_after(block if due_in else block + TIMER_SLACK):
            await self._conn.wait_for_entries(
                {source.stream: text(after), self._keys.wake: text(woken)}, block
            )
        await trio.lowlevel.checkpoint_if_cancelled()
        with trio.CancelScope(shield=True):
            rows, *_ = await self._run("claim", max_jobs, lease, ttl, limit)
            claims = await self._claims(rows)
        return claims

    async def renew(self, claims: Sequence[Claim], *, lease: float) -> Renewal:
        """Extend the leases of the claims still held; those lost, and those cancelled."""
        pairs = [part for claim in claims for part in (claim.job.id, claim.token)]
        if not pairs:
            await trio.lowlevel.checkpoint()  # a checkpoint, as every call is
            return Renewal()
        ttl = "" if self._recovery_ttl is None else self._recovery_ttl
        lost, cancel = await self._run("renew", lease, ttl, *pairs)
        return Renewal(
            lost=frozenset(text(token) for token in lost),
            cancel=frozenset(text(token) for token in cancel),
        )
