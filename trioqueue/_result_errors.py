"""What `Queue.result` raises for a job that finished without a value to give."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._exceptions import TrioqueueError

if TYPE_CHECKING:
    from ._records import JobRecord

__all__ = ["JobCancelled", "JobDropped", "JobFailed", "NoResult", "ResultNotStored"]


class NoResult(TrioqueueError):
    """`Queue.result` found the job finished without a value to give.

    The job failed (`JobFailed`), was dropped (`JobDropped`) or cancelled
    (`JobCancelled`), or completed with a return value that could not be stored
    (`ResultNotStored`).

    Attributes:
        record: The job's record as it finished (`JobRecord`): its state,
            attempts, last error and reason.
    """

    def __init__(self, record: JobRecord, message: str) -> None:
        self.record = record
        super().__init__(message)

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self.record.id


class JobFailed(NoResult):
    """The job is a dead letter: its attempts ran out, or it could not run.

    The message names the reason (``record.reason``) and the last error, if an
    attempt raised one; its traceback is ``record.last_error.traceback``. A job
    that became a dead letter without an error of its own (a job it was to run
    after failed) has ``record.last_error`` None.
    """

    def __init__(self, record: JobRecord) -> None:
        error, requeue = record.last_error, "requeue_dead (trioqueue dead requeue ID)"
        if error is None:
            message = (
                f"job {record.id!r} failed: it is a dead letter with no error of its own, "
                f"as .record.reason says: {record.reason}; {requeue} runs it again"
            )
        else:
            message = (
                f"job {record.id!r} failed: it is a dead letter ({record.reason}), its last "
                f"error {error.type}: {error.message}, with its traceback in "
                f".record.last_error; fix the cause, then requeue it with {requeue}"
            )
        super().__init__(record, message)


class JobDropped(NoResult):
    """The job's handler dropped it (`Drop`); the reason is ``record.reason``."""

    def __init__(self, record: JobRecord) -> None:
        super().__init__(record, f"job {record.id!r} was dropped: {record.reason}")


class JobCancelled(NoResult):
    """`Queue.cancel` ended the job before it finished; the reason is ``record.reason``."""

    def __init__(self, record: JobRecord) -> None:
        super().__init__(record, f"job {record.id!r} was cancelled: {record.reason}")


class ResultNotStored(NoResult):
    """The job completed, but its handler's return value could not be stored.

    It was not JSON, or larger than the pool's *max_result*
    (``record.result_error`` says which); the job ran once and is not retried.
    """

    def __init__(self, record: JobRecord) -> None:
        super().__init__(
            record,
            f"job {record.id!r} completed, but its result was not stored: {record.result_error}",
        )
