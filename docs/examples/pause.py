"""How-to: pause a queue while what its handlers call is down, then resume it."""

import trio

import trioqueue


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    done: list[str] = []

    async def send(job: trioqueue.Job) -> None:
        await trio.sleep(1)  # the mail server's answer
        done.append(job.id)

    async with trioqueue.open_worker_pool(backend, send, workers=2) as pool:
        await queue.enqueue_many(["a", "b"], ids=["m1", "m2"])
        await trio.sleep(0.5)  # both are running now
        await queue.pause()  # the mail server's maintenance window begins
        await queue.enqueue_many(["c", "d"], ids=["m3", "m4"])  # producers go on
        await trio.sleep(2)  # however long it lasts: nothing is claimed meanwhile
        print("paused:", await queue.is_paused(), "| done:", sorted(done))
        print("waiting:", await backend.job_ids("ready"))
        await queue.resume()
        pool.mark_producer_finished()
        await pool.wait_stopped()
    print("resumed | done:", sorted(done))


if __name__ == "__main__":
    trio.run(main)
