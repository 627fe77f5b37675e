import datetime

import trio

import trioqueue


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    schedules = [
        trioqueue.Schedule("heartbeat", every=datetime.timedelta(seconds=1)),
        trioqueue.Schedule("nightly", cron="0 3 * * *", timezone="Europe/Riga", missed="latest"),
    ]

    async def handle(job: trioqueue.Job) -> None:
        print(job.id)  # heartbeat@2026-12-03T10:00:01Z, one line a second

    async with trioqueue.open_worker_pool(backend, handle) as pool:
        async with trioqueue.open_scheduler(queue, schedules) as scheduler:
            print("nightly next at", scheduler.next_ticks["nightly"])
            await trio.sleep(2.5)
        # the next ticks are stored ahead: drain would wait for them, so stop instead
        await pool.shutdown(grace=5)


trio.run(main)
