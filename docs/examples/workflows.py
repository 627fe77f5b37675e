"""How-to: jobs that run after others (a chain, a group, a job after the group)."""

import trio

import trioqueue

finished: list[tuple[float, str]] = []  # when each job's work ended, and which


async def handle(job: trioqueue.Job) -> object:
    step = job.payload["step"]
    await trio.sleep(1)  # the work
    finished.append((trio.current_time(), job.id))
    if step == "charge" and job.payload.get("card") == "expired":
        raise RuntimeError("card declined")
    return job.payload.get("pages", step)


async def main() -> None:
    started = trio.current_time()
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    # a chain: each step starts once the one before completed
    await queue.enqueue_chain(
        [{"step": "reserve"}, {"step": "charge"}, {"step": "ship"}],
        ids=["order-1:reserve", "order-1:charge", "order-1:ship"],
    )
    # a group of three, side by side, and a job that runs once all three completed
    chapters = [{"step": "render", "pages": n} for n in (12, 30, 7)]
    group = await queue.enqueue_many(chapters, ids=["ch1", "ch2", "ch3"])
    receipts = [r for r in group if isinstance(r, trioqueue.Receipt)]
    await queue.enqueue({"step": "bind"}, id="book", after=receipts)
    # a chain whose second step fails: the third never runs
    await queue.enqueue_chain(
        [{"step": "reserve"}, {"step": "charge", "card": "expired"}, {"step": "ship"}],
        ids=["order-2:reserve", "order-2:charge", "order-2:ship"],
    )
    print("waiting:", await queue.job_ids("deferred"))
    retry = trioqueue.RetryPolicy(max_attempts=1)
    async with trioqueue.open_worker_pool(backend, handle, workers=4, retry=retry) as pool:
        async with queue.results(["ch1", "ch2", "ch3"]) as results:
            pages = sum([outcome.unwrap() async for _, outcome in results])
        print("the group rendered", pages, "pages")
        pool.mark_producer_finished()
    # to the second from the start (jobs that end together, in the order of their ids)
    for second, job_id in sorted((round(when - started), job_id) for when, job_id in finished):
        print(f"{second} s  {job_id}")
    shipped = await queue.status("order-2:ship")
    assert shipped is not None
    print(shipped.id, shipped.state.value + ":", shipped.reason)


if __name__ == "__main__":
    trio.run(main)
