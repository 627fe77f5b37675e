"""A handler module whose dependency is not installed (``trioqueue worker`` must say so)."""

import trioqueue_absent_dependency  # type: ignore[import-not-found]  # noqa: F401


async def run(job: object) -> None:
    """Never reached: the import above fails."""
