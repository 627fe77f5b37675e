"""The Redis key layout of one queue, and the cluster hash-slot rule it must obey.

Every multi-key move is one Lua script. On a single server any queue name works
(``cache.warmups``). On a Redis Cluster a script's keys must share one hash
slot, which holds when the queue name carries a hash tag (``{thumbnails}``):
every derived key starts with the name, and Redis hashes only the tag. A queue
whose keys span slots is refused on a cluster (`RedisKeys.slot_problem`), in one
line that names the tag to use.
"""

from __future__ import annotations

import binascii

import attrs

from ..._exceptions import ConfigurationError
from ..._payload import PRIORITIES

__all__ = ["JOB_INFIX", "SLOTS", "SUFFIXES", "RedisKeys", "hash_slot", "hash_tag"]

SLOTS = 16384
"""Hash slots in a Redis Cluster."""


def hash_tag(key: bytes) -> bytes:
    """The part of *key* Redis Cluster hashes: the first non-empty ``{…}``, else all of it."""
    start = key.find(b"{")
    if start != -1:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def hash_slot(key: str | bytes) -> int:
    """The Redis Cluster slot of *key* (CRC16/XMODEM of its hash tag, modulo 16384)."""
    raw = key.encode() if isinstance(key, str) else key
    return binascii.crc_hqx(hash_tag(raw), 0) % SLOTS


SUFFIXES = (
    ".processing", ".claims", ".dead", ".unqueued", ".finished", ".stats", ".seq",
    ".config", ".suspects", ".held", ".retrying", ".wake", ".scheduled", ".events",
    ".priority+2", ".priority+1", ".priority-1", ".priority-2", ".expiry", ".deferred",
    ".unique", ".failing",
)  # fmt: skip
"""What a queue's own keys add to its name; no queue name may end with one."""
JOB_INFIX = ".job:"
"""Between a queue's name and a job id in a record's key; no queue name may hold it."""
RATE_INFIX = ".rate:"
"""Between a queue's name and a rate key in the key of that key's limit times."""
RATE_LINE_INFIX = ".rateline:"
"""Between a queue's name and a rate key in the key of the line waiting for its starts."""
INFIXES = (JOB_INFIX, RATE_INFIX, RATE_LINE_INFIX)
"""What no queue name may hold: each comes between a queue's name and an id or a key."""


def _check_reserved(queue: str) -> None:
    """Refuse a name that is, or could be, a key of another queue."""
    clash = next((s for s in SUFFIXES if queue.endswith(s)), None)
    if clash is None:
        clash = next((infix for infix in INFIXES if infix in queue), None)
    if clash is not None:
        raise ConfigurationError(
            f"RedisBackend(queue={queue!r}): a queue's name may not end with "
            f"{', '.join(SUFFIXES)} nor contain {', '.join(map(repr, INFIXES))} (found "
            f"{clash!r}): such a name "
            "is a key of another queue. Choose another name"
        )


def _suggest(queue: str) -> str:
    bare = queue.replace("{", "").replace("}", "") or "queue"
    return "{" + bare + "}"


@attrs.frozen
class RedisKeys:
    """Every key one queue uses. Build with `RedisKeys.for_queue`."""

    ready: str
    """List of ready jobs of priority 0: producers push on the left, claims take
    from the right. Its name is the queue's, so a plain ``LPUSH`` feeds it."""
    processing: str
    """List of jobs a blocking ``BLMOVE`` moved and no claim registered yet (a few)."""
    claims: str
    """Sorted set of claimed job ids, scored by the time the claim expires."""
    dead: str
    """List of dead-lettered job ids, oldest at the right."""
    unqueued: str
    """List of jobs accepted while the ready list was full (`AddMode.SUBMIT`)."""
    finished: str
    """Sorted set of finished job ids by finish time, for count-based retention."""
    stats: str
    """Hash of counters shared by every process using the queue."""
    sequence: str
    """Counter for claim tokens."""
    config: str
    """Hash of the settings every user of the queue must share (capacity, mode, key TTL)."""
    suspects: str
    """List of jobs held by dying workers more than once; each is claimed alone, first."""
    held: str
    """Sorted set of claimed job ids, scored by the time they were claimed."""
    retrying: str
    """Set of claimed job ids waiting out a retry backoff."""
    scheduled: str
    """Sorted set of jobs waiting for their due time, scored by it (the server's clock)."""
    events: str
    """Stream of the ids of finished jobs that someone waits for (`RedisBackend.finished`)."""
    job_prefix: str
    """Prefix of the per-job record hashes: ``job_prefix + job_id``."""
    levels: tuple[str, ...] = ()
    """Lists of ready jobs of the other priorities, as *ready* is: ``<queue>.priority+2``,
    ``+1``, ``-1`` and ``-2``, in that order (see `level`)."""
    expiry: str = ""
    """With a key TTL: sorted set of waiting jobs' ids, scored by when their records
    expire; each push keeps the records that would expire before the queue."""
    deferred: str = ""
    """Sorted set of the jobs waiting for the jobs they run after, scored by when
    they were accepted."""
    unique: str = ""
    """Hash of each unique key held (``enqueue(..., unique_key=...)``) to the id of the
    job holding it, while that job waits or runs."""
    failing: str = ""
    """List of the followers of jobs that ended without completing, still to be made
    dead letters: the first slice goes at once, the rest at the sweeps that follow."""
    stream: str = ""
    """For a stream source (`for_stream`): the stream its jobs come from; else ''."""
    wake: str = ""
    """For a stream source: a one-entry stream a redelivery writes to, to wake the
    consumers waiting for new entries (``XREAD BLOCK`` on both); else ''."""

    @classmethod
    def for_queue(
        cls, queue: str, *, processing: str | None = None, claims: str | None = None
    ) -> RedisKeys:
        """Derive every key from the queue name (any name: see `slot_problem` for clusters).

        Raises:
            ConfigurationError: The name is empty, or is or could be another queue's
                key (it ends with one of `SUFFIXES` or holds `JOB_INFIX`); the message
                names the fix.
        """
        if not isinstance(queue, str) or not queue:
            raise ConfigurationError(
                f"RedisBackend(queue={queue!r}): name the queue, e.g. queue='{{jobs}}'"
            )
        _check_reserved(queue)
        keys = cls(
            ready=queue,
            processing=processing if processing is not None else f"{queue}.processing",
            claims=claims if claims is not None else f"{queue}.claims",
            dead=f"{queue}.dead",
            unqueued=f"{queue}.unqueued",
            finished=f"{queue}.finished",
            stats=f"{queue}.stats",
            sequence=f"{queue}.seq",
            config=f"{queue}.config",
            suspects=f"{queue}.suspects",
            held=f"{queue}.held",
            retrying=f"{queue}.retrying",
            scheduled=f"{queue}.scheduled",
            events=f"{queue}.events",
            job_prefix=f"{queue}{JOB_INFIX}",
            levels=tuple(f"{queue}.priority{p:+d}" for p in PRIORITIES if p),
            expiry=f"{queue}.expiry",
            deferred=f"{queue}.deferred",
            unique=f"{queue}.unique",
            failing=f"{queue}.failing",
        )
        return keys

    @classmethod
    def for_stream(cls, stream: str, group: str) -> RedisKeys:
        """The keys of consumer group *group* reading *stream* (see `RedisBackend`'s *stream*).

        The group's own keys derive from ``<stream>:<group>``: its redelivery list
        (``ready``), claims, records and dead letters; each group reading a stream
        keeps its own.

        A group's name holds no ``:``, so that the base names one stream and one
        group only: stream ``{x}`` with group ``b:c`` and stream ``{x}:b`` with
        group ``c`` would otherwise share every key.

        Raises:
            ConfigurationError: A name is empty, the group's holds ``:``, or the
                derived name could be another queue's key.
        """
        for role, name in (("stream", stream), ("group", group)):
            if not isinstance(name, str) or not name:
                raise ConfigurationError(
                    f"RedisBackend({role}={name!r}): name the {role}, e.g. "
                    "stream='{uploads}', group='thumbnailer'"
                )
        if ":" in group:
            raise ConfigurationError(
                f"RedisBackend(group={group!r}): a group's name may not hold ':' (the group's "
                f"keys start with '{stream}:{group}', which stream '{stream}:"
                f"{group.partition(':')[0]}' with group '{group.partition(':')[2]}' would share): "
                f"name it without one, e.g. group={group.replace(':', '-')!r}"
            )
        base = f"{stream}:{group}"
        _check_reserved(base)
        return attrs.evolve(cls.for_queue(base), stream=stream, wake=f"{base}.wake")

    def rate_key(self, key: str) -> str:
        """The key holding rate key *key*'s times under a per-key limit (``lua/claim.lua``)."""
        return self.job_prefix.removesuffix(JOB_INFIX) + RATE_INFIX + key

    def rate_line(self, key: str) -> str:
        """The key holding the line of rate key *key*'s jobs waiting for their starts."""
        return self.job_prefix.removesuffix(JOB_INFIX) + RATE_LINE_INFIX + key

    def level(self, priority: int) -> str:
        """The ready list of jobs of *priority* (one of `PRIORITIES`)."""
        if priority == 0:
            return self.ready
        return self.levels[[p for p in PRIORITIES if p].index(priority)]

    def script_keys(self) -> list[str]:
        """The keys every script gets, in the order of ``lua/prelude/1-queue.lua``'s KEYS."""
        return [
            self.ready,
            self.processing,
            self.claims,
            self.dead,
            self.unqueued,
            self.finished,
            self.stats,
            self.sequence,
            self.config,
            self.suspects,
            self.held,
            self.retrying,
            self.scheduled,
            self.events,
            *self.levels,
            self.expiry,
            self.deferred,
            self.unique,
            self.failing,
            *([self.stream, self.wake] if self.stream else []),
        ]

    def all_keys(self) -> dict[str, str]:
        """Every key by its role (the job prefix with a sample id)."""
        named = attrs.asdict(self)
        named["job_prefix"] = self.job_prefix + "<id>"
        del named["levels"]
        for priority in PRIORITIES:
            if priority:
                named[f"priority{priority:+d}"] = self.level(priority)
        if not self.stream:
            del named["stream"], named["wake"]
        return named

    def slot_problem(self) -> str | None:
        """Why these keys cannot serve a queue on a Redis Cluster, in one line; None if they can.

        Every key must hash to the ready list's slot; the line names the tag to use.
        """
        slot = hash_slot(self.ready)
        stray = next(
            ((role, key) for role, key in self.all_keys().items() if hash_slot(key) != slot),
            None,
        )
        if stray is None:
            return None
        if self.stream:
            return (
                f"stream {self.stream!r}: on a Redis Cluster the stream and its group's keys "
                f"share one slot; name it with a hash tag, {_suggest(self.stream)!r}"
            )
        tag = _suggest(self.ready)
        role, key = stray
        if role in ("processing", "claims") and self.ready == tag:  # a key given by hand
            return (
                f"queue {self.ready!r}: on a Redis Cluster every key of a queue shares its "
                f"slot, and {role}={key!r} does not; start it with {tag}"
            )
        return (
            f"queue {self.ready!r}: on a Redis Cluster every key of a queue shares one "
            f"slot; name it with a hash tag, {tag!r}"
        )
