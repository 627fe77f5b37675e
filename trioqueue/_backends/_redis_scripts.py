"""The Lua scripts of the Redis backend: one atomic script per multi-key move."""

from __future__ import annotations

from importlib import resources
from typing import Final

__all__ = ["READ_ONLY", "SCRIPT_NAMES", "load_sources"]

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
)


READ_ONLY: Final = frozenset({"stats", "inspect", "purge_dead", "renew"})
"""Scripts that do not depend on the queue's shared settings: any user may run them."""


def load_sources() -> dict[str, str]:
    """Each script's full source: its READ_ONLY flag, the shared prelude, the script."""
    folder = resources.files(__package__).joinpath("lua")
    prelude = folder.joinpath("prelude.lua").read_text(encoding="utf-8")
    return {
        name: f"local READ_ONLY = {'true' if name in READ_ONLY else 'false'}\n"
        + prelude
        + "\n"
        + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
        for name in SCRIPT_NAMES
    }
