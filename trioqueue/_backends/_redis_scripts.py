"""The Lua scripts of the Redis backend: one atomic script per multi-key move."""

from __future__ import annotations

from importlib import resources
from typing import Final

__all__ = ["FLAGS", "READ_ONLY", "SCRIPT_NAMES", "load_sources"]

SCRIPT_NAMES: Final = (
    "add",
    "claim",
    "settle",
    "release",
    "renew",
    "sweep",
    "requeue_dead",
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
    "cancel": "allow-oom",  # it frees room
}
"""Each script's Redis 7 flags (``#!lua flags=…``); a script not named here has none."""


def load_sources() -> dict[str, str]:
    """Each script's full source: its flags, its READ_ONLY flag, the prelude, the script."""
    folder = resources.files(__package__).joinpath("lua")
    prelude = folder.joinpath("prelude.lua").read_text(encoding="utf-8")
    return {
        name: f"#!lua flags={FLAGS.get(name, '')}\n"
        + f"local READ_ONLY = {'true' if name in READ_ONLY else 'false'}\n"
        + prelude
        + "\n"
        + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
        for name in SCRIPT_NAMES
    }
