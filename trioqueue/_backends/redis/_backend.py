"""The Redis backend: a reliable list queue shared by many processes and machines.

Jobs wait on a list; a claim moves one into the processing list and records its
lease in a sorted set, in one Lua script; every outcome checks the claim's token,
so an owner whose claim was recovered cannot touch the new owner's job. When the
ready list is empty the fetcher blocks in ``BLMOVE`` and registers what it got
with the same script; the sweeper gives any processing entry without a lease one,
so a crash between the two cannot strand a job.
"""

from __future__ import annotations

from typing import final

from ._adding import Adding
from ._claiming import Claiming
from ._inspecting import Inspecting
from ._maintaining import Maintaining
from ._settling import Settling

__all__ = ["RedisBackend"]


@final
class RedisBackend(Adding, Claiming, Settling, Inspecting, Maintaining):
    """Jobs in Redis, shared by every process that names the same queue.

    Use it as an async context manager, which opens the connection::

        async with trioqueue.RedisBackend(
            "redis://localhost:6379/0", queue="{mail}", min_idle=30
        ) as backend:
            ...

    Reliable mode (the default): a job leaves Redis only after its handler is
    done with it (at-least-once). Claims are leased for *min_idle* seconds and
    renewed by the pool that holds them; the sweeper puts back claims whose
    owner stopped renewing them (a crashed process), so *min_idle* bounds how
    long a crash delays a job, not how long a handler may run.

    Cancellation: as the `Backend` protocol says. Each call is one Lua script,
    atomic on the server, unless it says it goes in slices (the outcomes of
    calls made at the same moment share one script); a script sent is waited
    for (at most the I/O timeout), so a cancellation never hides a change, and
    one that comes first leaves everything as it was.

    Simple mode (``reliable=False``): a claim takes the job off the queue, and
    an interrupted handler is never run again (at-most-once), for handlers
    whose side effects must not repeat. A job whose worker dies while holding
    it becomes a dead letter once its lease runs out, and one whose handler a
    pool's shutdown cancelled becomes one at once; their reasons say so, and
    you can inspect or requeue them by hand. A handler that raises is still
    retried by the pool's `RetryPolicy` (``max_attempts=1`` for one attempt).

    Args:
        url: ``redis://host:port/db``.
        queue: The ready list's key; all the queue's keys derive from it. Any
            name works on a single server (``"cache.warmups"``); on a Redis
            Cluster the keys must share one slot, so give it a hash tag
            (``"{mail}"``), or the first call raises `ConfigurationError`
            naming the tag.
        capacity: Most jobs on the ready list; `Queue.enqueue` waits beyond it.
            *capacity*, *reliable* and *key_ttl* are the queue's shared
            settings (`settings`): every user of a queue follows the ones
            stored with it, so leave them as None to follow the queue's (a new
            queue gets 1000, reliable and no key TTL); a value given that
            disagrees with the stored one is refused (`ConfigurationError`)
            before anything is written (reading stats needs no agreement).
            `configure` changes them.
        min_idle: Seconds a claim stays valid without renewal (the lease).
            Workers renew their claims, so this bounds how long a crash delays a
            job, not how long a handler may run. Required to claim from a
            reliable queue or a stream (seed 001: a recovery set needs it; the
            first claim without it raises `ConfigurationError`); producers and
            views need none. In simple mode, how long a crashed worker's job
            waits before it becomes a dead letter; None there is 30 s, the
            default of ``trioqueue worker --min-idle``.
        recovery_ttl: Seconds an abandoned queue's claims set lives; must
            exceed *min_idle*. None keeps it until the claims are recovered.
        retention: How long finished records are kept (count and age).
        processing: The processing list's key (default ``<queue>.processing``).
        recovery_zset: The claims sorted set's key (default ``<queue>.claims``).
        clock: None to use the Redis server's clock (the default: hosts need
            no clock agreement). Tests pass ``trio.current_time`` to run the
            scripts on a mock clock. Claims and every wait take the same path
            either way: a blocking wait has the server's timeout, and a Trio
            deadline a moment after it, which ends it on a mock clock.
        reliable: True for at-least-once delivery with recovery (a new
            queue's default), False for a simple, at-most-once queue.
        key_ttl: Seconds an unfed queue lives; a new queue without one lives
            for ever. Opt-in, because it loses jobs on purpose: every enqueue
            keeps the queue alive *key_ttl* seconds more, with every job
            waiting in it (a queue that is used never expires, as seed 001
            says), and a queue nobody fed for that long disappears with the
            jobs left in it; their records may linger up to *key_ttl* more,
            run by nothing. Claimed jobs and dead letters
            never expire, nor do the counters and the claim-token sequence
            (two small keys); finished records follow the retention, else
            expire after *key_ttl* too.
        max_deliveries: Most times one job may be delivered without an
            outcome (to a worker that died, or lost its lease); the next claim
            dead-letters it instead, with the reason. This stops a poison job
            whose handler kills its worker from killing workers for ever. An
            attempt that failed and was retried is no such delivery, so a job's
            own *max_attempts* may be higher. None for no limit. Jobs a clean
            shutdown put back do not count.
        wait_replicas: After each enqueue, wait (Redis ``WAIT``, at most
            2 seconds) until this many replicas have the jobs, so
            that a failover to a replica cannot lose an enqueue it acknowledged
            (Redis replicates after it replies). Fewer in time raises
            `BackendUnavailable`: the jobs are stored, not yet copied; enqueue
            them again with the same ids. 0 (the default) does not wait.
        stream: Read jobs from this Redis stream instead of a list (a stream
            source; give it instead of *queue*). Every consumer group reading
            the stream gets every entry, and keeps its own claims, records and
            dead letters under ``<stream>:<group>``. An entry another program
            added (``XADD uploads * image cat.png``) is a job whose id is the
            entry's and whose payload is its fields as an object of strings.
            `Queue.enqueue` adds entries too (fields ``id``, ``payload``,
            ``hash``); it never trims the stream (``MAXLEN`` would drop entries
            a group has not read yet) and never waits: a stream has no
            capacity. Idempotency by id is kept by the group the producer's
            backend names. On a Redis Cluster give the stream a hash tag
            (``"{uploads}"``).
        group: The consumer group to read the stream through (required with
            *stream*); created if missing, from *start*.
        start: Where a group created here begins: ``"$"`` (the default: entries
            added from then on; `Queue.enqueue` creates the group before it adds
            its first entry, so none of its jobs is missed) or ``"0"`` (the
            whole stream).
        consumer: This backend's consumer name in the group; None for one of
            its own (host, process id, random), which is what you want: two
            processes must never share one.
        delete_done: Delete a finished job's entry (``XDEL``) as well as
            acknowledge it (``XACK``); only when no other group reads the stream.
        max_connections: Most connections this backend opens to each Redis
            server (64 by default), idle, in use or reading off the reply a
            cancelled call still owes. A call that finds them all in use waits
            its turn (first come, first served) until its I/O deadline, then
            raises `BackendUnavailable` saying so. A worker pool's wait for jobs
            holds one while it waits.

    Raises:
        ConfigurationError: A setting is out of range; the message says what
            to change.
    """
