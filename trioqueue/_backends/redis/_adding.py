"""The Redis backend's producer side: adding jobs, idempotent by id, in slices."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Final

import trio

from ..._backend_values import AddMode, AddResult, NewJob, Receipt
from ..._exceptions import BackendUnavailable, DependencyNotFound, IdempotencyConflict, QueueFull
from ..._records import JobState
from ._connection import text

if TYPE_CHECKING:
    from collections.abc import Sequence

from ._base import RedisBase

__all__ = ["Adding"]

_REPLICA_WAIT: Final = 2.0  # seconds an enqueue waits for its replicas (wait_replicas)


_WAIT_FOR_ROOM: Final = (0.005, 0.1)  # first and longest pause while enqueue waits for room


# Jobs per add script call: each takes Redis about 5 commands, so a slice stays ~1 ms.
_ADD_SLICE: Final = 500


def _options_argument(job: NewJob) -> str:
    """The add script's options argument for *job*: '' or a JSON object of those set."""
    options = {
        key: value
        for key, value in (
            ("a", job.max_attempts),
            ("t", job.handler_timeout),
            ("n", job.task),
            ("m", job.headers or None),
        )
        if value is not None
    }
    if not options:
        return ""
    return json.dumps(options, separators=(",", ":"), ensure_ascii=False)


def _extras_argument(job: NewJob) -> str:
    """The add script's extras for *job*: what it runs after, its keys ('' for none)."""
    extras: dict[str, object] = {}
    if job.after:
        extras["a"] = job.after
    if job.unique_key is not None:
        extras["u"] = job.unique_key
        if job.debounce:
            extras["b"] = 1
    if job.rate_key is not None:
        extras["r"] = job.rate_key
    return json.dumps(extras, separators=(",", ":"), ensure_ascii=False) if extras else ""


class Adding(RedisBase):
    """RedisBackend methods: adding jobs, idempotent by id, in slices."""

    async def add(self, job: NewJob, mode: AddMode) -> Receipt:
        """Accept *job*; see `Backend.add`. Waiting for room polls with a short backoff."""
        (result,) = await self.add_many([job], mode)
        if isinstance(result, Exception):
            raise result
        return result

    async def add_many(self, jobs: Sequence[NewJob], mode: AddMode) -> list[AddResult]:
        """Accept *jobs* in order; see `Backend.add_many`.

        One script call per slice of 500 jobs; waiting for room polls with
        a short backoff, and sends again only the jobs not handled yet.
        """
        if not jobs:
            await trio.lowlevel.checkpoint()
            return []
        if self._stream is not None and any(j.delay is not None or j.at is not None for j in jobs):
            raise ValueError(
                f"stream {self._stream.stream!r}: a stream source cannot hold a job until a due "
                "time (XADD has none, and every group reads the entry at once); enqueue "
                "delayed jobs to a list queue (RedisBackend(url, queue=...))"
            )
        if self._stream is not None and any(j.priority for j in jobs):
            raise ValueError(
                f"stream {self._stream.stream!r}: a stream source has no priorities (every "
                "group reads its entries in stream order); enqueue prioritised jobs to a list "
                "queue (RedisBackend(url, queue=...)), or leave priority= at 0"
            )
        if self._stream is not None and any(j.after or j.unique_key or j.rate_key for j in jobs):
            raise ValueError(
                f"stream {self._stream.stream!r}: a stream source cannot hold a job until "
                "others complete, nor keep one job per unique key, nor limit starts per "
                "rate key (every group reads each entry at once); enqueue such jobs to a "
                "list queue (RedisBackend(url, queue=...))"
            )
        results: list[AddResult] = []
        pause = _WAIT_FOR_ROOM[0]
        while len(results) < len(jobs):
            chunk = jobs[len(results) : len(results) + _ADD_SLICE]
            args = [
                field
                for job in chunk
                for field in (
                    job.id,
                    job.encoded,
                    job.payload_hash,
                    self._due_argument(job),
                    _options_argument(job),
                    str(job.priority) if job.priority else "",
                    _extras_argument(job),
                )
            ]
            reply = await self._add(mode, args, len(results), len(chunk))
            full = False
            for job, status, detail in zip(chunk, reply[::2], reply[1::2], strict=False):
                if status == b"full" and mode is AddMode.WAIT:
                    full = True  # the script stopped here: this job and the rest wait
                    break
                results.append(self._add_result(job, status, detail))
            if full:
                await trio.sleep(pause)  # nothing of the rest accepted if cancelled here
                pause = min(pause * 2, _WAIT_FOR_ROOM[1])
            else:
                pause = _WAIT_FOR_ROOM[0]
        return results

    def _due_argument(self, job: NewJob) -> str:
        """The add script's due-time argument for *job* ('' for ready at once).

        A delay counts on the server's clock; so does an *at*, unless this backend
        runs on an injected clock (tests): then *at* is made a delay here.
        """
        if job.delay is not None:
            return f"d{job.delay!r}"
        if job.at is None:
            return ""
        if self._clock is not None:
            return f"d{job.at - time.time()!r}"
        return f"a{job.at!r}"

    async def _add(
        self, mode: AddMode, args: list[str | bytes], done: int, sent: int
    ) -> list[bytes]:
        """One add script call; with `wait_replicas`, and a ``WAIT`` on its connection.

        The ``WAIT`` goes with the script, so it counts the script's writes. Not
        cancellable (at most 2 seconds), like the script: the jobs are stored
        already, and an enqueue that raises `trio.Cancelled` must have accepted
        nothing.

        Raises:
            BackendUnavailable: Fewer replicas than wanted had the jobs within 2 seconds.
        """
        wanted = self._wait_replicas
        if not wanted:
            return list(await self._run("add", mode.value, *args))
        if not self._adopted:
            await self._adopt_settings()
        reply, reached = await self._conn.run_replicated(
            "add", wanted, _REPLICA_WAIT, mode.value, *args
        )
        if reached < wanted:
            raise BackendUnavailable(
                self._conn.where,
                f"jobs {done + 1}-{done + sent} of this call were stored, but only {reached} "
                f"of the {wanted} replicas asked for (wait_replicas) had them after "
                f"{_REPLICA_WAIT:g} s",
                advice="enqueue them again with the same ids once the replicas are back "
                "(jobs given no id would be enqueued twice)",
            )
        return list(reply)

    def _add_result(self, job: NewJob, status: bytes, detail: bytes) -> AddResult:
        """One job's reply from the add script, counted in this process's metrics."""
        if status in (b"new", b"dup"):
            fresh = status == b"new"
            if fresh:
                self._metrics.enqueued += 1
            else:
                self._metrics.deduplicated += 1
            return _receipt(job.id, detail, deduplicated=not fresh)
        if status == b"conflict":
            self._metrics.conflicts += 1
            return IdempotencyConflict(job.id, text(detail), job.payload_hash)
        if status == b"keyed":  # another job holds the unique key: this is its receipt
            self._metrics.deduplicated += 1
            return _receipt(text(detail[2:]), detail[:2], deduplicated=True)
        if status == b"noparent":
            return DependencyNotFound(job.id, text(detail))
        return QueueFull(int(detail))  # the queue's capacity now, maybe configured anew


# add.lua's letters for a job's state, the first of the two of its mark
_STATE_MARKS: Final = {
    b"e": JobState.RECEIVED,
    b"s": JobState.SCHEDULED,
    b"w": JobState.DEFERRED,
    b"p": JobState.PROCESSING,
    b"r": JobState.FAILED_RETRY,
    b"x": JobState.FAILED,
    b"c": JobState.COMPLETED,
    b"d": JobState.DROPPED,
    b"k": JobState.CANCELLED,
}


def _receipt(job_id: str, mark: bytes, *, deduplicated: bool) -> Receipt:
    """The receipt for job *job_id* of add.lua's *mark* (state letter, then 1 if ready)."""
    state = _STATE_MARKS[mark[:1]]
    return Receipt(
        id=job_id,
        deduplicated=deduplicated,
        queued=mark[1:2] == b"1",
        state=state,
    )
