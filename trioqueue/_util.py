"""Small helpers with no dependencies inside trioqueue."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MAX_DELAY", "fixup_module_metadata"]

MAX_DELAY: Final = 100 * 365.25 * 86_400
"""The longest wait before a job runs, in seconds (100 years): a delayed job's
`delay`, an `at` this far ahead, a retry's delay. Beyond it a due time would be
no moment anyone means, and past year 9999 no `datetime` can show it."""


def fixup_module_metadata(module_name: str, namespace: dict[str, Any]) -> None:
    """Make re-exported names report *module_name* as their home (as trio does).

    Tracebacks, reprs and documentation then show ``trioqueue.Queue`` rather
    than the private module it is defined in.
    """
    seen: set[int] = set()

    def fix(qualname: str, obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        module = getattr(obj, "__module__", None)
        if module is None or not module.startswith("trioqueue."):
            return
        try:
            obj.__module__ = module_name
        except (AttributeError, TypeError):  # e.g. type aliases
            return
        if isinstance(obj, type):
            obj.__qualname__ = qualname
            for attr_name, value in obj.__dict__.items():
                if isinstance(value, type) or callable(value):
                    fix(f"{qualname}.{attr_name}", value)

    for name in namespace.get("__all__", ()):
        fix(name, namespace[name])
