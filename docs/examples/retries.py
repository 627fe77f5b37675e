"""Tutorial, part 2: failures, retries and dead letters."""

import trio

import trioqueue


async def charge(job: trioqueue.Job) -> None:
    """Fails its first two attempts, as a payment service in trouble would."""
    if job.payload["card"] == "expired":
        raise ValueError("card expired")  # fails every time: a dead letter
    if job.attempt <= 2:
        raise ConnectionError(f"payment service busy (attempt {job.attempt})")
    print(f"charged {job.payload['amount']} on attempt {job.attempt}")


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    # up to 4 attempts; waits drawn from [0, 1 s], [0, 2 s], [0, 4 s] ("full jitter")
    retry = trioqueue.RetryPolicy(max_attempts=4, base_delay=1.0, max_delay=60.0)
    async with trioqueue.open_worker_pool(backend, charge, retry=retry, seed=7):
        await queue.enqueue({"card": "visa", "amount": 20}, id="order-1")
        await queue.enqueue({"card": "expired", "amount": 5}, id="order-2")
    for record in await queue.dead_letters():
        assert record.last_error is not None
        print(f"dead letter {record.id} after {record.attempts} attempts:")
        print(f"  {record.last_error.type}: {record.last_error.message}")
    # once the card is fixed, a dead letter goes back on the queue
    await queue.requeue_dead("order-2")
    record = await queue.status("order-2")
    assert record is not None
    print("order-2 is", record.state.value)


if __name__ == "__main__":
    trio.run(main)
