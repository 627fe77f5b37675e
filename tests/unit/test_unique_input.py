"""``unique_key=`` and ``debounce=`` are checked before anything is sent."""

from __future__ import annotations

import datetime
import re

import pytest

import trioqueue
from trioqueue._job_input import prepare


def test_a_debounce_is_the_jobs_delay_and_marks_it():
    job = prepare(1, "j", unique_key="k", debounce=datetime.timedelta(seconds=3))
    assert (job.unique_key, job.debounce, job.delay) == ("k", True, 3.0)
    plain = prepare(1, "j", unique_key="k")
    assert (plain.unique_key, plain.debounce, plain.delay) == ("k", False, None)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"unique_key": 7}, TypeError, r"a unique_key must be a str, not int"),
        ({"unique_key": ""}, ValueError, r"a unique_key must be 1 to 256 characters long"),
        ({"debounce": 5}, TypeError, r"debounce= needs a unique_key="),
        ({"unique_key": "k", "debounce": 5, "delay": 1}, TypeError, r"without delay=, at="),
        ({"unique_key": "k", "debounce": 5, "after": ["p"]}, TypeError, r"or after="),
        (
            {"unique_key": "k", "debounce": 0},
            ValueError,
            r"debounce=0: give a finite number of sec",
        ),
        (
            {"unique_key": "k", "debounce": -1},
            ValueError,
            r"^debounce=-1: give a finite number of seconds > 0",
        ),
        ({"unique_key": "k", "debounce": "soon"}, TypeError, r"^debounce= takes seconds"),
    ],
)
def test_a_bad_key_or_debounce_is_refused_with_what_to_do(options, error, message):
    with pytest.raises(error, match=message):
        prepare(1, "j", **options)


async def test_a_sharded_queue_refuses_a_unique_key_before_sending():
    backend = trioqueue.ShardedBackend.on_redis(
        "redis://127.0.0.1:1/0", queue="s", shards=2, min_idle=5
    )
    with pytest.raises(ValueError, match="cannot keep one job per unique_key"):
        await trioqueue.Queue(backend).enqueue(1, unique_key="k")


@pytest.mark.parametrize("options", [{"unique_key": "k"}, {"debounce": 5}])
async def test_a_chain_refuses_a_key_naming_the_chain(options):
    queue = trioqueue.Queue(trioqueue.MemoryBackend())
    with pytest.raises(TypeError, match="enqueue_chain takes no unique_key= or debounce="):
        await queue.enqueue_chain([1, 2], **options)
    assert await queue.backend.pending() == 0


@pytest.mark.parametrize("char", ["\x1b", "\r", "\n", "\x00", "\x7f"])
@pytest.mark.parametrize("field", ["unique_key", "rate_key", "header"])
def test_a_key_or_header_value_with_a_control_character_is_refused(field, char):
    options: dict[str, object] = (
        {"headers": {"tenant": f"acme{char}evil"}}
        if field == "header"
        else {field: f"acme{char}evil"}
    )
    with pytest.raises(ValueError, match=f"control character.*{re.escape(repr(char))}"):
        prepare(1, "j", **options)


def test_a_tab_in_a_header_value_is_text():
    assert prepare(1, "j", headers={"note": "a\tb"}).headers == {"note": "a\tb"}
