"""`trioqueue worker --cron FILE`: schedules from a TOML file.

```toml
[[schedule]]
name = "nightly-report"
cron = "0 3 * * *"
timezone = "Europe/Riga"
missed = "latest"
payload = { report = "daily" }

[[schedule]]
name = "heartbeat"
every = 60          # seconds
```
"""

from __future__ import annotations

import datetime
import math
import tomllib
from pathlib import Path
from typing import Any

from ._exceptions import ConfigurationError
from ._schedule import Schedule
from ._util import MAX_DELAY

__all__ = ["load_schedules"]

_KEYS = {"name", "cron", "every", "timezone", "payload", "missed", "catch_up"}


def load_schedules(path: str) -> list[Schedule]:
    """The schedules of the TOML file at *path*, each a ``[[schedule]]`` table.

    Raises:
        ConfigurationError: The file cannot be read or parsed, or an entry is not a
            schedule; the message names the file and the entry.
    """
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigurationError(
            f"--cron {path}: cannot read it ({error.strerror or error})"
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"--cron {path}: not a TOML file ({error})") from None
    entries = document.get("schedule")
    extra = sorted(set(document) - {"schedule"})
    if extra or not isinstance(entries, list) or not entries:
        raise ConfigurationError(
            f"--cron {path}: give one [[schedule]] table per schedule, each with a name and "
            "cron = '…' or every = SECONDS" + (f" (found {extra})" if extra else "")
        )
    schedules = [_schedule(path, n, entry) for n, entry in enumerate(entries, 1)]
    names = [s.name for s in schedules]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigurationError(f"--cron {path}: schedules named {twice} appear more than once")
    return schedules


def _schedule(path: str, number: int, entry: Any) -> Schedule:
    where = f"--cron {path}, schedule {number}"
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: a [[schedule]] table, not {entry!r}")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where}: unknown keys {unknown}; a schedule takes {sorted(_KEYS)}"
        )
    options = dict(entry)
    every = options.get("every")
    if every is not None:
        if isinstance(every, bool) or not isinstance(every, int | float):
            raise ConfigurationError(f"{where}: every = SECONDS, a number, not {every!r}")
        if not math.isfinite(every) or not 1 <= every <= MAX_DELAY:  # else timedelta raises
            raise ConfigurationError(
                f"{where}: every = {every!r}: give a whole number of seconds, at least one "
                "and at most 100 years"
            )
        options["every"] = datetime.timedelta(seconds=every)
    if "name" not in options:
        raise ConfigurationError(f"{where}: give it a name = '…'")
    try:
        return Schedule(**options)
    except ConfigurationError as error:
        raise ConfigurationError(f"{where}: {error}") from None
