"""Seed 003's ingest service: POST /jobs stores each event once, and none is lost.

The service answers from the app in this process (httpx's ASGI transport), on
a queue with room for two: the third event is stored without a place on the
queue (202), and runs once the workers make room.
"""

import httpx
import trio

import trioqueue
from trioqueue.http import create_app


async def handle(job: trioqueue.Job) -> None:
    await trio.sleep(1)  # the event's work


async def main() -> None:
    backend = trioqueue.MemoryBackend(capacity=2)
    transport = httpx.ASGITransport(app=create_app(backend))
    async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:

        async def post(event_id: str, payload: object) -> None:
            reply = await client.post("/jobs", json={"id": event_id, "payload": payload})
            print("POST", event_id, reply.status_code)

        await post("e1", {"user": 1})  # 201: stored, and on the queue
        await post("e2", {"user": 2})  # 201
        await post("e3", {"user": 3})  # 202: stored, not queued: the queue is full
        await post("e1", {"user": 1})  # 200: the same event again, deduplicated
        await post("e1", {"user": 9})  # 409: the same id with another payload
        await show_stats(client)  # the depth is not one number
        async with trioqueue.open_worker_pool(backend, handle):
            await trio.sleep(0.5)  # the workers make room: e3 goes on the queue
            await show_stats(client)
        for event_id in ("e1", "e2", "e3"):
            record = (await client.get(f"/jobs/{event_id}")).json()
            print(event_id, record["state"], "after", record["attempts"], "attempt")
        await show_stats(client)


async def show_stats(client: httpx.AsyncClient) -> None:
    stats = (await client.get("/stats")).json()
    gauges = ", ".join(f"{name} {stats['gauges'][name]}" for name in GAUGES)
    counters = ", ".join(f"{name} {stats[name]}" for name in COUNTERS)
    print(f"gauges: {gauges}\ncounters: {counters}")


GAUGES = ["queue_depth", "backlog", "inflight"]  # on the queue; accepted, waiting; running
COUNTERS = ["enqueued", "deduplicated", "conflicts", "succeeded"]  # they only ever rise


if __name__ == "__main__":
    trio.run(main)
