"""The Lua scripts of the Redis backend: one atomic script per multi-key move."""

from __future__ import annotations

from importlib import resources
from typing import Final

__all__ = ["SCRIPT_NAMES", "load_sources"]

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
)


def load_sources() -> dict[str, str]:
    """Each script's full source: the shared prelude followed by the script."""
    folder = resources.files(__package__).joinpath("lua")
    prelude = folder.joinpath("prelude.lua").read_text(encoding="utf-8")
    return {
        name: prelude + "\n" + folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
        for name in SCRIPT_NAMES
    }
