"""The liveness watch over a connection's requests, on Trio's mock clock."""

from __future__ import annotations

import pytest
import trio

from trioqueue import BackendUnavailable
from trioqueue._backends.redis._watch import LivenessWatch


class Probe:
    """A probe whose finding the test sets; notes when it was asked."""

    def __init__(self) -> None:
        self.down: str | None = None
        self.asked: list[float] = []

    async def is_down(self) -> bool:
        self.asked.append(trio.current_time())
        return self.down is not None

    def finding(self) -> BackendUnavailable:
        assert self.down is not None
        return BackendUnavailable("redis://h", self.down)


def watching(probe: Probe) -> LivenessWatch:
    watch = LivenessWatch(probe.is_down, probe.finding)
    watch.start()
    return watch


async def test_a_request_that_waits_on_a_down_redis_is_given_up(autojump_clock):
    probe = Probe()
    probe.down = "Connection refused"
    watch = watching(probe)
    with pytest.raises(BackendUnavailable, match="Connection refused"):
        await watch.call(trio.sleep_forever)  # a reply that never comes
    # given up on the first look after one second: the looks are 0.25 s apart
    assert trio.current_time() == 1.0
    assert probe.asked == [1.0]
    watch.stop()


async def test_a_slow_reply_from_a_live_redis_is_waited_for(autojump_clock):
    probe = Probe()
    watch = watching(probe)

    async def slow() -> str:
        await trio.sleep(3.1)
        return "reply"

    assert await watch.call(slow) == "reply"
    # asked at each look once the request was late, never given up
    assert probe.asked == [1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0]
    watch.stop()


async def test_quick_replies_never_ask_the_probe(autojump_clock):
    probe = Probe()
    probe.down = "would give up"
    watch = watching(probe)

    async def quick(n: int) -> int:
        await trio.sleep(0.9)
        return n

    for n in range(5):
        assert await watch.call(lambda n=n: quick(n)) == n
    assert probe.asked == []
    watch.stop()


async def test_only_late_requests_are_given_up(autojump_clock):
    probe = Probe()
    watch = watching(probe)
    outcomes: dict[str, object] = {}

    async def request(name: str, started: float) -> None:
        await trio.sleep(started)
        try:
            outcomes[name] = await watch.call(trio.sleep_forever)
        except BackendUnavailable as exc:
            outcomes[name] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(request, "early", 0)
        nursery.start_soon(request, "recent", 1.4)
        await trio.sleep(1.6)
        probe.down = "Connection refused"  # the look at 1.75 finds it down
        await trio.sleep(0.5)
        assert isinstance(outcomes.pop("early"), BackendUnavailable)
        assert outcomes == {}  # the recent one waited 0.35 s then: not late yet
        await trio.sleep(0.5)
        assert isinstance(outcomes.pop("recent"), BackendUnavailable)  # at 2.5
    watch.stop()


async def test_after_stop_nothing_is_watched(autojump_clock):
    probe = Probe()
    probe.down = "Connection refused"
    watch = watching(probe)
    watch.stop()
    with trio.move_on_after(5):
        await watch.call(trio.sleep_forever)
    assert probe.asked == []


async def test_a_failing_probe_is_logged_and_the_watch_goes_on(autojump_clock, caplog):
    calls = 0

    async def flaky() -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("probe broke")
        return True

    watch = LivenessWatch(flaky, lambda: BackendUnavailable("redis://h", "Connection refused"))
    watch.start()
    with pytest.raises(BackendUnavailable):
        await watch.call(trio.sleep_forever)
    assert trio.current_time() == 1.25  # the second look gave it up
    assert "the Redis liveness watch failed; it goes on" in caplog.text
    assert "probe broke" in caplog.text
    watch.stop()


async def test_each_caller_given_up_gets_an_exception_of_its_own(autojump_clock):
    probe = Probe()
    probe.down = "Connection refused"
    watch = watching(probe)
    raised: list[BaseException] = []

    async def request() -> None:
        try:
            await watch.call(trio.sleep_forever)
        except BackendUnavailable as exc:
            raised.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(request)
    assert len(raised) == 3
    assert len({id(exc) for exc in raised}) == 3
    assert probe.asked == [1.0]  # one probe for all three
    watch.stop()


async def test_an_outer_cancellation_is_not_mistaken_for_the_watch(autojump_clock):
    watch = watching(Probe())
    with trio.move_on_after(0.5) as scope:
        await watch.call(trio.sleep_forever)
    assert scope.cancelled_caught
    watch.stop()
