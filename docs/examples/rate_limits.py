"""How-to: at most so many starts per second for the queue, and for each customer."""

import trio

import trioqueue
from trioqueue import RateLimit


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    # the upstream API takes 5 calls a second from us, and 1 a second per customer
    await queue.set_rate_limits(queue=RateLimit(5, per=1.0), per_key=RateLimit(1, per=1.0))
    print("limits:", (await queue.rate_limits()).describe())
    started = trio.current_time()

    async def call_api(job: trioqueue.Job) -> None:
        print(f"{trio.current_time() - started:.1f} s  {job.payload['customer']} {job.id}")
        await trio.sleep(0.05)  # the call itself

    # acme floods the queue first; globex's two jobs do not wait behind acme's
    await queue.enqueue_many([{"customer": "acme"}] * 3, ids=["a1", "a2", "a3"], rate_key="acme")
    await queue.enqueue_many([{"customer": "globex"}] * 2, ids=["g1", "g2"], rate_key="globex")
    async with trioqueue.open_worker_pool(backend, call_api, workers=10) as pool:
        await trio.sleep(0.5)
        waiting = await queue.status("a2")
        assert waiting is not None
        print("a2 is", waiting.state.value, "until its turn")
        pool.mark_producer_finished()


if __name__ == "__main__":
    trio.run(main)
