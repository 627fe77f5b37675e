import trio

import trioqueue


async def send_email(job: trioqueue.Job) -> None:
    if job.payload["to"].endswith(".invalid"):
        raise trioqueue.Drop("no such domain")  # finished, not retried
    await trio.sleep(0.01)  # talk to the mail server; an exception here is retried


async def main() -> None:
    backend = trioqueue.MemoryBackend(capacity=100)
    queue = trioqueue.Queue(backend)
    async with trioqueue.open_worker_pool(backend, send_email, workers=8):
        for n in range(1000):
            # The id makes the enqueue idempotent: running this loop twice adds nothing.
            await queue.enqueue({"to": f"user{n}@example.com"}, id=f"welcome-{n}")
        await queue.enqueue({"to": "nobody@example.invalid"}, id="welcome-x")
    # Leaving the block waited until every job was completed, dropped or dead-lettered.
    print(backend.metrics.snapshot())  # every counter, gauge and latency, one per line
    print((await queue.status("welcome-x")).state)  # dropped


trio.run(main)
