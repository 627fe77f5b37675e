import signal

import trio

import trioqueue


async def handle(job: trioqueue.Job) -> None:
    await trio.sleep(1)


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    async with trioqueue.open_worker_pool(backend, handle) as pool:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            print("serving; stop with Ctrl-C or SIGTERM", flush=True)
            async for _ in signals:
                report = await pool.shutdown(grace=30)
                print(report)  # handlers finished or cancelled, jobs put back
                break


trio.run(main)
