"""The Lua scripts of the Redis backend: one atomic script per multi-key move."""

from __future__ import annotations

from importlib import resources
from typing import Final

__all__ = ["CHECKED", "FLAGS", "READ_ONLY", "SCRIPT_NAMES", "load_sources"]

SCRIPT_NAMES: Final = (
    "add",
    "claim",
    "settle",
    "release",
    "renew",
    "sweep",
    "requeue_dead",
    "run_now",
    "purge_dead",
    "stats",
    "inspect",
    "unmove",
    "pending",
    "configure",
    "settings",
    "mark_schedule",
    "schedule_marks",
    "watch",
    "events",
    "cancel",
    "job_ids",
    "pause",
    "rate_limit",
    "progress",
)


READ_ONLY: Final = frozenset(
    {
        "stats",
        "inspect",
        "pending",
        "purge_dead",
        "renew",
        "configure",
        "settings",
        "schedule_marks",
        "watch",
        "events",
        "job_ids",
        "progress",
        "pause",  # writes its flag only: is_paused must not create a queue
        "rate_limit",  # writes its limits only, as pause
    }
)
"""Scripts that never store the queue's settings: they find the queue set up, or not there."""

FLAGS: Final = {
    # Scripts that shrink the data or keep its size run even when Redis is out of
    # memory, so workers drain a full Redis; the others (add, requeue_dead) are
    # refused before they start. Without a flags line Redis checks memory only when
    # a script first calls a growing command, after it may have written already.
    "claim": "allow-oom",
    "settle": "allow-oom",
    "release": "allow-oom",
    "sweep": "allow-oom",
    "unmove": "allow-oom",
    "renew": "allow-oom",
    "purge_dead": "allow-oom",
    "stats": "no-writes,allow-oom",
    "inspect": "no-writes,allow-oom",
    "pending": "no-writes,allow-oom",
    "settings": "no-writes,allow-oom",
    "schedule_marks": "no-writes,allow-oom",
    # marks the records of jobs someone waits for: a few bytes each
    "watch": "allow-oom",
    "events": "no-writes,allow-oom",
    "job_ids": "no-writes,allow-oom",
    "cancel": "allow-oom",  # it frees room
    "run_now": "allow-oom",  # moves one job between lists
    "pause": "allow-oom",  # a flag: pausing a full Redis is how to stop the load on it
    "rate_limit": "allow-oom",  # two fields, as pause: slowing down a full Redis's load
    "progress": "allow-oom",  # one field replaced: a full Redis must not fail the handler
}
"""Each script's Redis 7 flags (``#!lua flags=…``); a script not named here has none."""


CHECKED: Final = {
    # the ready lists, the processing list (whether the wake element landed), the
    # unqueued list, the finished set, the counters, the token sequence, the config and
    # the scheduled set, the expiry set: never the claims, held, retrying, suspect or
    # events keys; the dead list and the deferred set only for jobs that run after
    # others, which add.lua checks itself
    "add": (1, 2, 5, 6, 7, 8, 9, 13, 15, 16, 17, 18, 19),
}
"""The queue keys (positions in KEYS) a script can touch, where that is not every key.

The prelude checks each one's type before the script writes anything; the stream
keys are checked too whenever the queue has them. A script not named here checks all.
"""


def load_sources() -> dict[str, str]:
    """Each script's full source: flags, READ_ONLY and CHECKED, the prelude's parts, the script."""
    folder = resources.files(__package__).joinpath("lua")
    parts = sorted(folder.joinpath("prelude").iterdir(), key=lambda part: part.name)
    prelude = "\n".join(
        part.read_text(encoding="utf-8") for part in parts if part.name.endswith(".lua")
    )
    return {
        name: f"#!lua flags={FLAGS.get(name, '')}\n"
        + f"local READ_ONLY = {'true' if name in READ_ONLY else 'false'}\n"
        + f"local CHECKED = {_lua_list(CHECKED.get(name))}\n"
        + prelude
        + "\n"
        + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
        for name in SCRIPT_NAMES
    }


def _lua_list(positions: tuple[int, ...] | None) -> str:
    """*positions* as a Lua table, or nil for none given."""
    return "nil" if positions is None else "{" + ", ".join(map(str, positions)) + "}"
