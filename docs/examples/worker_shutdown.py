"""Seed 000's worker: bounded, with retries apart, and a shutdown that waits for the producer.

The queue holds one job. Half the jobs fail their first attempts, and their
retries sleep in tasks of their own, outside the workers, so a full queue never
deadlocks them. The producer stops for a while in the middle: nothing is
pending then, but the pool does not stop, because the producer has not said
it is finished (leaving the block says so).
"""

import trio

import trioqueue


async def flaky(job: trioqueue.Job) -> None:
    if job.payload % 2 and job.attempt <= 2:
        raise ConnectionError("the service is busy")
    await trio.sleep(0.1)


async def main() -> None:
    backend = trioqueue.MemoryBackend(capacity=1)
    queue = trioqueue.Queue(backend)
    retry = trioqueue.RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=5)
    async with trioqueue.open_worker_pool(backend, flaky, workers=2, retry=retry, seed=1):
        for n in range(5):
            await queue.enqueue(n)  # waits while the one place is taken
        await trio.sleep(3)  # every job so far is done: nothing pending
        for n in range(5, 10):
            await queue.enqueue(n)  # still taken: the pool did not stop
    snap = backend.metrics.snapshot()
    print(f"enqueued {snap.enqueued}, attempts {snap.processed}, succeeded {snap.succeeded}")
    print(f"failed {snap.failed}, retries {snap.retries}, dead letters {snap.dead_lettered}")


if __name__ == "__main__":
    trio.run(main)
