"""How-to: metadata with each job (a tenant, where it came from), read by the handler."""

import trio

import trioqueue


async def invoice(job: trioqueue.Job) -> None:
    tenant = job.headers.get("tenant", "default")
    print(f"{job.id}: invoicing for {tenant} (sent by {job.headers.get('origin', '?')})")


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    await queue.enqueue({"order": 17}, id="inv-17", headers={"tenant": "acme", "origin": "web"})
    await queue.enqueue({"order": 18}, id="inv-18")
    record = await queue.status("inv-17")
    assert record is not None
    print("stored:", record.headers)
    async with trioqueue.open_worker_pool(backend, invoice, workers=1):
        pass


if __name__ == "__main__":
    trio.run(main)
