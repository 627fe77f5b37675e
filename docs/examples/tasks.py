"""How-to: defaults per task, and a blocking function run in a worker thread."""

import hashlib

import trio

import trioqueue


@trioqueue.task(max_attempts=2, handler_timeout=10, priority=1)
async def send_receipt(job: trioqueue.Job) -> str:
    """Two attempts, 10 s each, and level 1 for the jobs of this task."""
    if job.payload["to"] == "nobody":
        raise LookupError("no such address")
    return f"sent to {job.payload['to']}"


@trioqueue.task(run_sync=True, handler_timeout=60)
def checksum(job: trioqueue.Job) -> str:
    """Blocking work (hashing a file, say): a plain function, run in a thread."""
    digest = hashlib.sha256()
    for block in range(job.payload["blocks"]):
        trio.from_thread.check_cancelled()  # a timeout or a shutdown stops it here
        digest.update(block.to_bytes(4, "big") * 1024)
    return digest.hexdigest()[:16]


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    # the pool's own policy: 8 attempts, except where a task or a job says otherwise
    retry = trioqueue.RetryPolicy(max_attempts=8, base_delay=0.1)
    async with trioqueue.open_worker_pool(backend, [send_receipt, checksum], retry=retry):
        await queue.enqueue({"to": "a@example.com"}, id="r1", task=send_receipt)
        await queue.enqueue({"to": "nobody"}, id="r2", task=send_receipt)
        await queue.enqueue({"blocks": 256}, id="c1", task=checksum)
    print("r1:", await queue.result("r1"))
    print("c1:", await queue.result("c1"))
    for record in await queue.dead_letters():
        assert record.last_error is not None
        print(f"{record.id}: dead after {record.attempts} attempts ({record.last_error.message})")
    r1 = await queue.status("r1")
    assert r1 is not None
    print("r1 ran at level", r1.priority)


if __name__ == "__main__":
    trio.run(main)
