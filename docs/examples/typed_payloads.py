"""How-to: a payload type per task, checked at enqueue, typed in the handler."""

import attrs
import trio

import trioqueue


@attrs.frozen
class Thumbnail:
    """What a thumbnail job says: the image, and the size to make."""

    url: str
    width: int
    height: int = 0  # 0: keep the aspect ratio


@trioqueue.task(payload_type=Thumbnail)
async def make_thumbnail(job: trioqueue.Job) -> str:
    thumb: Thumbnail = job.payload  # an instance, not a dict
    return f"{thumb.url} at {thumb.width}x{thumb.height or 'auto'}"


async def main() -> None:
    backend = trioqueue.MemoryBackend()
    queue = trioqueue.Queue(backend)
    async with trioqueue.open_worker_pool(backend, [make_thumbnail]):
        await queue.enqueue(Thumbnail("a.png", 320), id="t1", task=make_thumbnail)
        await queue.enqueue(
            {"url": "b.png", "width": 64, "height": 48}, id="t2", task=make_thumbnail
        )
        try:
            await queue.enqueue({"url": "c.png", "width": "wide"}, id="t3", task=make_thumbnail)
        except ValueError as exc:
            print("refused:", exc)
    print("t1:", await queue.result("t1"))
    print("t2:", await queue.result("t2"))
    print("t3 stored:", await queue.status("t3") is not None)


if __name__ == "__main__":
    trio.run(main)
