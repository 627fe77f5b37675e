"""What a public class holds, counting the private parts it is split into.

`RedisBackend` is put together from private mixins, one job each
(``trioqueue/_backends/redis/``); its methods live in their ``__dict__``, not
the class's own. The checks on every public method walk these too.
"""

from __future__ import annotations


def own_members(cls: type) -> dict[str, object]:
    """*cls*'s attributes, with its private bases' (those defined in a private module)."""
    found: dict[str, object] = {}
    for part in reversed(cls.__mro__):
        if part is cls or part.__module__.startswith("trioqueue."):
            found.update(vars(part))
    return found
