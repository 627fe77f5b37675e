"""How-to: a long job reports how far it got; anyone can read it from its record."""

import trio

import trioqueue


async def import_rows(job: trioqueue.Job) -> int:
    total = job.payload["rows"]
    for done in range(0, total + 1, 250):
        await trioqueue.report_progress({"done": done, "of": total})
        await trio.sleep(1)  # importing the next 250 rows
    return total


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    async with trioqueue.open_worker_pool(backend, import_rows):
        await queue.enqueue({"rows": 1000}, id="import-1")
        await trio.sleep(0.5)
        for _ in range(3):  # at 1.5, 2.5 and 3.5 s
            await trio.sleep(1)
            record = await queue.status("import-1")
            assert record is not None
            print(record.state.value, record.progress)
    record = await queue.status("import-1")
    assert record is not None
    print(record.state.value, record.progress, "->", record.result, "rows")


if __name__ == "__main__":
    trio.run(main)
