"""dramatiq's benchmark adapter: ``RedisBroker``, an actor and one ``dramatiq.Worker``.

See ``_adapter.py``. Settings, each chosen as what a user who wants speed would deploy:

- ``worker_threads`` = the benchmark's concurrency, in this one worker process
  (dramatiq's CLI default is 8 threads in each of several processes). The actor
  is a plain function, dramatiq's usual kind: each thread runs one at a time.
- Prefetch at its default, twice the thread count: one consumer thread fetches
  that many messages at a time (a Lua script that moves them to this worker's
  ack set) and hands them to the threads.
- ``worker_timeout`` = WORKER_TIMEOUT (100 ms; the default is 1 s). dramatiq's
  Redis consumer polls: after an empty fetch it sleeps 5 ms, doubling (with
  jitter) on each further empty fetch up to ``worker_timeout`` (a fetch skipped
  because the prefetch is full counts as empty too). So a worker can take up to
  ``worker_timeout`` to see a new job even under load (at 500 jobs/s the default
  gave a p90 of 160-230 ms, 100 ms gave 9-10 ms); 100 ms is the low-latency
  setting a user would pick, at about ten cheap polls a second when idle.
- No result backend (dramatiq stores none unless one is added) and the default
  middleware (age limit, time limit, shutdown notifications, callbacks,
  pipelines, retries).
- Delivery kept at dramatiq's defaults: a fetched message sits in the worker's
  ack set until it is acked after the actor returns; a worker whose heartbeat
  stops for 60 s has its unacked messages requeued.
- Keys: ``dramatiq:<queue>*`` (the broker's default namespace, then the queue).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import dramatiq
from _adapter import Args, Recorder, main
from _round_trip import thread_round_trip
from dramatiq.brokers.redis import RedisBroker

ACTOR = "noop"
WORKER_TIMEOUT = 100  # milliseconds: the longest an idle worker sleeps between polls


def broker(args: Args) -> RedisBroker:
    redis = RedisBroker(url=args.url)
    dramatiq.set_broker(redis)  # so nothing falls back on a default broker
    return redis


def enqueue(args: Args) -> None:
    def noop(payload: dict[str, Any]) -> None:
        pass  # only the worker's actor runs; this one names the actor for ``send``

    redis = broker(args)
    actor = dramatiq.actor(noop, actor_name=ACTOR, queue_name=args.queue)
    for i in range(args.jobs):
        delay = args.delay(i)
        if delay:
            time.sleep(delay)
        actor.send(args.payload(i))
    redis.close()


def work(args: Args, recorder: Recorder) -> None:
    round_trip = thread_round_trip(args)

    def noop(payload: dict[str, Any]) -> None:
        recorder.record(payload)
        if round_trip is not None:
            round_trip(payload)

    redis = broker(args)
    dramatiq.actor(noop, actor_name=ACTOR, queue_name=args.queue)
    worker = dramatiq.Worker(redis, worker_threads=args.concurrency, worker_timeout=WORKER_TIMEOUT)
    recorder.start()
    worker.start()
    threading.Event().wait()  # the worker's threads run the jobs; the recorder ends us


if __name__ == "__main__":
    main(enqueue, work)
