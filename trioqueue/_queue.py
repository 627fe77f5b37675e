"""The producer side: put jobs on a backend, look them up, recover dead letters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Unpack, final

from ._backend_values import AddMode, AddResult, NewJob, Receipt
from ._exceptions import ConfigurationError
from ._job_input import JobOptions, known_options, prepare, prepare_plain
from ._payload import MAX_PAYLOAD

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, MutableMapping

    from ._backend import Backend
    from ._metrics import Metrics
from ._queue_controls import QueueControls
from ._queue_reads import QueueReads

__all__ = ["Queue"]


@final
class Queue(QueueReads, QueueControls):
    """The producer side of a backend; usable with or without a worker pool.

    Enqueue is idempotent by job id: the same id with the same payload returns
    the existing job (``Receipt.deduplicated``), the same id with another
    payload raises `IdempotencyConflict`, and no id means a fresh one. Payloads
    are compared by their canonical JSON, so dict key order does not matter.

    Args:
        backend: Where the jobs go, e.g. a `MemoryBackend`.
        max_payload: The most bytes a payload may take as canonical JSON; a larger
            one is refused with ValueError before anything is sent. 1 MiB by
            default: a queue carries references to bulk data, not the data.
        on_enqueue: Hooks called, in order, with the headers of each job this
            queue enqueues (a dict they may change) before it is checked and
            sent: to add a tenant, or the trace context
            (`trioqueue.otel.inject_trace_context`). One call of `enqueue_many`
            calls each once, for the whole batch. A hook that raises stops the
            enqueue, and nothing is sent.

    Raises:
        ConfigurationError: *max_payload* is not a whole number >= 1.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        max_payload: int = MAX_PAYLOAD,
        on_enqueue: Iterable[Callable[[MutableMapping[str, str]], None]] = (),
    ) -> None:
        if isinstance(max_payload, bool) or not isinstance(max_payload, int) or max_payload < 1:
            raise ConfigurationError(
                f"Queue(max_payload={max_payload!r}): use a whole number of bytes >= 1"
            )
        self._backend = backend
        self._max_payload = max_payload
        self._on_enqueue = tuple(on_enqueue)

    def __repr__(self) -> str:
        return f"<trioqueue.Queue on {self._backend!r}>"

    @property
    def backend(self) -> Backend:
        """The backend this queue puts jobs on."""
        return self._backend

    @property
    def metrics(self) -> Metrics:
        """The backend's metrics; call ``.snapshot()`` to read them."""
        return self._backend.metrics

    @property
    def max_payload(self) -> int:
        """The most bytes a payload may take as canonical JSON."""
        return self._max_payload

    async def enqueue(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> Receipt:
        """Add a job, waiting for room while the ready queue is full.

        A job with a *delay* or an *at* is stored until it is due
        (`JobState.SCHEDULED`, ``Receipt.scheduled``) and never waits for room: it
        does not count against the capacity until due. When due it goes on the
        ready queue, in due order; one that finds the queue full waits, still
        stored, for room. The due time is the backend's clock (on Redis, the
        server's): ``delay`` counts from when the backend accepts the job.

        Idempotency ignores the due time and the options: the same id and
        payload again is the existing job, whatever its due time (a retried call
        computes another), and the first due time and options stand.

        Always checkpoints. If cancelled, nothing was accepted.

        Args:
            payload: Any JSON-serialisable value.
            id: The job id, for idempotent enqueue; None for a fresh one.
            delay: Seconds (or a `datetime.timedelta`) until the job is due;
                None or 0 for at once.
            at: When the job is due, a `datetime.datetime` with a time zone; a
                time past is at once. Not with *delay*.
            max_attempts: The attempts this job gets, overriding the pool's
                `RetryPolicy.max_attempts` (its backoff still applies); stored with
                the job, so every pool honours it. None: the pool's.
            handler_timeout: Seconds one attempt of this job may run before it is
                cancelled and counted as a failure, overriding the pool's
                *handler_timeout*; stored with the job. None: the pool's.
            task: Which handler runs the job, in a pool given several by name
                (``open_worker_pool(backend, {"send_email": send_email, ...})``);
                a pool with one handler runs every job with it. A `Task` names its
                task, and gives the job its *priority* unless the call gives one.
            priority: The job's level, a whole number from -2 to 2 (`PRIORITIES`;
                its `Task`'s, else 0): a claim takes the highest level that holds a job,
                first in first out within a level. Strict: lower levels wait while
                higher ones have jobs. Capacity counts every level together.
                Stored with the job; a stream source takes none but 0.
            headers: Metadata for the job, a dict of text to text (a tenant, trace
                context; at most 64, 8 KiB in all): stored with it, and read by its
                handler as `Job.headers`.
            after: The jobs this one runs after, by id or `Receipt` (at most 100):
                it waits (`JobState.DEFERRED`, ``Receipt.deferred``), taking no room,
                until the last of them completes, then goes on the ready queue. If one
                of them fails (a dead letter), is dropped or is cancelled, this job
                becomes a dead letter whose reason names it, and so do the jobs
                after this one. Jobs completed already count as done. Not with
                *delay* or *at*. A requeued dead letter runs at once: requeue the
                failed job first, and its followers once it completes.
            unique_key: While a job enqueued with this key waits or runs (until it
                completes, fails, is dropped or is cancelled), another job with
                the same key is not added: the call returns that job's receipt,
                with ``deduplicated`` set and its *id*. Unlike *id*, the key
                compares nothing else: the newer payload is dropped.
            debounce: With *unique_key*: the job is due this many seconds (or a
                `datetime.timedelta`) from now, and until then a newer job with
                the same key and a *debounce* replaces it: the older is cancelled
                (its reason names the newer), and the newer waits its own
                *debounce* from its arrival. Once the job is ready or running, a
                newer one is not added, as with *unique_key* alone. Not with
                *delay*, *at* or *after*.
            rate_key: Whom the job's starts count against, for the queue's per-key
                rate limit (`set_rate_limits`): e.g. a customer's id. A job over
                its key's limit waits (`JobState.SCHEDULED`) for the next start
                the limit allows, and jobs of other keys go ahead meanwhile.
                Without a per-key limit it is kept and does nothing.

        Raises:
            TypeError: *payload* is not JSON-serialisable, *id* is not a str, or
                *delay* and *at* are both given or of the wrong type, or *after*
                is given with either, or *debounce* without *unique_key* or with
                *delay*, *at* or *after*.
            ValueError: *id* is empty or too long, *payload* is larger than
                *max_payload* or nests lists and dicts more than 100 levels deep,
                *delay* is negative, *at* has no time zone, *priority* is not
                one of `PRIORITIES`, *after* holds a bad id or this job's own, or
                *unique_key* or *rate_key* is empty or too long.
            IdempotencyConflict: *id* exists with a different payload.
            DependencyNotFound: A job named in *after* is unknown (never enqueued,
                or forgotten after the retention); this job was not accepted.
        """
        job = self._prepare(payload, id, options)
        return await self._backend.add(job, AddMode.WAIT)

    async def try_enqueue(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> Receipt:
        """Add a job if the ready queue has room, without waiting for room.

        Like `enqueue`, but raises `QueueFull` (and accepts nothing) when full.
        A duplicate of an existing job is returned even when the queue is full,
        and a delayed job never finds it full.

        Always checkpoints. If cancelled, nothing was accepted.
        """
        job = self._prepare(payload, id, options)
        return await self._backend.add(job, AddMode.NOWAIT)

    async def submit(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> Receipt:
        """Store a job without ever waiting or failing for a full queue.

        When the ready queue has room the job goes on it; otherwise it is stored
        with ``queued = False`` and scheduled as soon as room frees, before any
        producer waiting in `enqueue`. Raises as `enqueue` does, but never
        `QueueFull`; *delay* and *at* as there.

        Always checkpoints. If cancelled, nothing was accepted.
        """
        job = self._prepare(payload, id, options)
        return await self._backend.add(job, AddMode.SUBMIT)

    async def enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        ids: Iterable[str | None] | None = None,
        **options: Unpack[JobOptions],
    ) -> list[AddResult]:
        """Add many jobs in order, waiting for room as `enqueue` does; one result per job.

        Every payload and id is checked before any job is sent, so a bad one
        accepts nothing. Then each job is accepted or found as `enqueue` would
        (its `Receipt`), except that a job whose id exists with another payload is
        not raised: its place in the list holds the `IdempotencyConflict`, and the
        other jobs are accepted all the same. On Redis the jobs go in slices of
        500 per round trip.

        Always checkpoints. If cancelled while it waits for room, the jobs before
        the one it waited on were accepted: enqueue the same batch with the same
        ids again to finish it (the accepted ones are deduplicated).

        Args:
            payloads: JSON-serialisable values, one per job.
            ids: The job ids, one per payload (None for a fresh one), or None for
                fresh ids throughout.
            delay: Seconds (or a `datetime.timedelta`) until every job of the batch
                is due, as for `enqueue`; they are stored until then and never wait
                for room.
            at: When every job of the batch is due (an aware `datetime`); not with
                *delay*.
            max_attempts: The attempts every job of the batch gets, as for `enqueue`.
            handler_timeout: Seconds one attempt of each job may run, as for `enqueue`.
            task: The task name of every job of the batch, as for `enqueue`.
            priority: The level of every job of the batch, as for `enqueue`.
            headers: The headers of every job of the batch, as for `enqueue`.
            after: The jobs every job of the batch runs after, as for `enqueue`; a
                job's place holds the `DependencyNotFound` when one is unknown.
            unique_key: The key of every job of the batch, as for `enqueue`: the
                first is added, the others find it.
            debounce: As for `enqueue`: the last job of the batch replaces the others.
            rate_key: The rate key of every job of the batch, as for `enqueue`.

        Raises:
            TypeError: A payload is not JSON-serialisable, or an id is not a str;
                the message names the job's place in the batch. Both *delay* and
                *at* are given.
            ValueError: As `enqueue` says, or *ids* is not as long as *payloads*.
        """
        jobs = self._prepare_many(payloads, ids, options)
        return await self._backend.add_many(jobs, AddMode.WAIT)

    async def try_enqueue_many(
        self,
        payloads: Iterable[Any],
        *,
        ids: Iterable[str | None] | None = None,
        **options: Unpack[JobOptions],
    ) -> list[AddResult]:
        """Like `enqueue_many`, without waiting: a job that finds the queue full gets `QueueFull`.

        The jobs before it were accepted; a later job that exists already is
        still found (its receipt, or its conflict).

        Always checkpoints. If cancelled, the jobs up to some point of the batch
        were accepted and none after it (on Redis the batch goes in slices of
        500): send the batch again with the same ids to finish it.
        """
        jobs = self._prepare_many(payloads, ids, options)
        return await self._backend.add_many(jobs, AddMode.NOWAIT)

    async def submit_many(
        self,
        payloads: Iterable[Any],
        *,
        ids: Iterable[str | None] | None = None,
        **options: Unpack[JobOptions],
    ) -> list[AddResult]:
        """Like `enqueue_many`, storing what does not fit as `submit` does; never waits.

        Always checkpoints. If cancelled, the jobs up to some point of the batch
        were accepted and none after it (on Redis the batch goes in slices of
        500): send the batch again with the same ids to finish it.
        """
        jobs = self._prepare_many(payloads, ids, options)
        return await self._backend.add_many(jobs, AddMode.SUBMIT)

    async def enqueue_chain(
        self,
        payloads: Iterable[Any],
        *,
        ids: Iterable[str | None] | None = None,
        **options: Unpack[JobOptions],
    ) -> list[AddResult]:
        """Add jobs that run one after another: each starts once the one before completes.

        The first job runs after the jobs *after* names, if any (else it is ready at
        once); each other one is enqueued with ``after=[the one before]``. If a job of
        the chain fails, is dropped or is cancelled, the rest become dead letters
        that name it. The batch goes as `enqueue_many` sends one (on Redis, 500
        jobs per round trip), checked before anything is sent, and the other
        options apply to every job. Enqueue it again with the same *ids* to
        finish a chain cut short: the accepted jobs are deduplicated.

        To run jobs side by side and wait for them all (a group), enqueue them with
        `enqueue_many` and read `results`; to run a job once they all complete,
        enqueue it with ``after=`` their receipts.

        Always checkpoints. If cancelled while the first job waits for room, nothing
        was accepted; the others never wait.

        Raises:
            TypeError, ValueError: As `enqueue_many` says, or a *unique_key* or
                *debounce* is given: a chain's jobs are each other's parents, so one
                key would leave one job of it.
        """
        if options.get("unique_key") is not None or options.get("debounce") is not None:
            raise TypeError(
                "enqueue_chain takes no unique_key= or debounce=: every job of the chain "
                "would share the key, and only the first would be added; give the key to "
                "the job the chain runs after (after=) instead"
            )
        jobs = self._prepare_many(payloads, ids, options, chain=True)
        return await self._backend.add_many(jobs, AddMode.WAIT)

    def _prepare(self, payload: Any, job_id: str | None, options: JobOptions) -> NewJob:
        """One job, checked and encoded (see `prepare`); a job without options the short way."""
        if not options and not self._on_enqueue:
            return prepare_plain(payload, job_id, self._max_payload)
        return prepare(payload, job_id, self._max_payload, **self._options(options))

    def _options(self, options: JobOptions) -> JobOptions:
        """*options* checked for typos, with the headers the enqueue hooks give."""
        options = known_options(options)
        if not self._on_enqueue:
            return options
        given = options.get("headers")
        if given is not None and not isinstance(given, Mapping):
            return options  # type: ignore[unreachable]  # a caller not typed: prepare refuses it
        headers = dict(given or {})
        for hook in self._on_enqueue:
            hook(headers)
        return {**options, "headers": headers or None}

    def _prepare_many(
        self,
        payloads: Iterable[Any],
        ids: Iterable[str | None] | None,
        options: JobOptions,
        *,
        chain: bool = False,
    ) -> list[NewJob]:
        """Every job of a batch, checked and encoded, before any is sent.

        *chain*: each job after the first runs after the one before it.
        """
        options = self._options(options)
        if isinstance(ids, str) or isinstance(payloads, str | bytes):
            raise TypeError(
                "enqueue_many takes a list of payloads and a list of ids (one per payload), "
                "not a single str; for one job use enqueue(payload, id=...)"
            )
        payloads = list(payloads)
        chosen = [None] * len(payloads) if ids is None else list(ids)
        if len(chosen) != len(payloads):
            raise ValueError(
                f"enqueue_many got {len(payloads)} payloads and {len(chosen)} ids: pass one id "
                "per payload (None for a fresh one), or ids=None"
            )
        jobs: list[NewJob] = []
        for n, (payload, job_id) in enumerate(zip(payloads, chosen, strict=True)):
            if chain and jobs:
                options = {**options, "after": [jobs[-1].id]}
            try:
                jobs.append(prepare(payload, job_id, self._max_payload, **options))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"job {n} of the batch (nothing was sent): {exc}") from exc
        return jobs

    async def enqueue_and_wait(
        self, payload: Any, *, id: str | None = None, **options: Unpack[JobOptions]
    ) -> Any:
        """Enqueue a job as `enqueue` does, wait until it finishes, return its result.

        For request/response use. With an *id*, calling again after a lost reply
        (or a cancelled wait) finds the same job instead of running another, and
        returns its result. Cancellable: a cancellation while it waits for the
        result leaves the job enqueued (it runs all the same). It raises what
        `enqueue` raises, then what `result` raises.
        """
        receipt = await self.enqueue(payload, id=id, **options)
        return await self.result(receipt.id)
