"""Small helpers with no dependencies inside trioqueue."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_DELAY", "fixup_module_metadata", "public_dir"]

MAX_DELAY: Final = 100 * 365.25 * 86_400
"""The longest wait before a job runs, in seconds (100 years): a delayed job's
`delay`, an `at` this far ahead, a retry's delay. Beyond it a due time would be
no moment anyone means, and past year 9999 no `datetime` can show it."""


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Make re-exported names report *module_name* as their home (as trio does).

    Tracebacks, reprs and documentation then show ``trioqueue.Queue`` rather
    than the private module it is defined in. A class split into private parts
    (``RedisBackend``'s mixins, each one job) shows their methods as its own.
    """
    seen: set[int] = set()
    exported = {id(namespace[name]) for name in namespace.get("__all__", ())}

    def members(cls: type) -> dict[str, object]:
        """*cls*'s attributes, with those of its private bases that it does not override."""
        found: dict[str, object] = {}
        for part in reversed(cls.__mro__):
            private = id(part) not in exported and part.__module__.startswith("trioqueue.")
            if part is cls or private:
                found.update(vars(part))
        return found

    def fix(qualname: str, obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        if module is None or not module.startswith("trioqueue."):
            return
        try:
            obj.__module__ = module_name
            obj.__qualname__ = qualname  # type: ignore[attr-defined]  # a mixin's method: RedisBackend.add
        except (AttributeError, TypeError):  # e.g. type aliases
            return
        if isinstance(obj, type):
            for attr_name, value in members(obj).items():
                if isinstance(value, type) or callable(value):
                    fix(f"{qualname}.{attr_name}", value)

    for name in namespace.get("__all__", ()):
        fix(name, namespace[name])


def public_dir(names: list[str], namespace: dict[str, Any]) -> list[str]:
    """What a package's ``__dir__`` shows: its public *names* and its own dunders.

    Not its private modules nor its ``__future__`` import, which are attributes all
    the same: ``dir()`` and completion offer a user only what is meant for them.
    """
    return sorted([*names, *(name for name in namespace if name.startswith("__"))])
