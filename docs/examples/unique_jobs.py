"""How-to: one job per key while it waits or runs, and debounce a burst into its last job."""

import trio

import trioqueue


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    started = trio.current_time()

    async def handle(job: trioqueue.Job) -> None:
        print(f"{trio.current_time() - started:.1f} s  {job.id} starts: {job.payload}")
        await trio.sleep(1)  # the work

    # one sync per account at a time: a second request finds the first
    first = await queue.enqueue({"account": 7}, id="sync-a", unique_key="sync:7")
    second = await queue.enqueue({"account": 7}, id="sync-b", unique_key="sync:7")
    assert first.id == "sync-a"
    print("sync-b:", "found" if second.deduplicated else "added", second.id)
    async with trioqueue.open_worker_pool(backend, handle) as pool:
        # a burst of edits, half a second apart: only the last one is indexed,
        # 1 s after it came
        for n in range(4):
            await queue.enqueue(
                {"doc": 42, "edit": n}, id=f"index-{n}", unique_key="index:42", debounce=1
            )
            await trio.sleep(0.5)
        await trio.sleep(2)
        pool.mark_producer_finished()
    replaced = await queue.status("index-0")
    assert replaced is not None
    print("index-0", replaced.state.value + ":", replaced.reason)
    after = await queue.enqueue({"account": 7}, id="sync-c", unique_key="sync:7")
    print("sync-c:", "found" if after.deduplicated else "added", after.id)


if __name__ == "__main__":
    trio.run(main)
