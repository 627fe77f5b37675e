"""trioqueue: a job queue for Trio.

Producers put jobs on a `Queue`; `open_worker_pool` runs a handler on each;
failures are retried with capped, fully jittered exponential backoff; exhausted
jobs become dead letters; shutdown drains, or times out and puts every
unfinished job back. The backend is embedded (`MemoryBackend`) or Redis
(`RedisBackend`), shared by many processes and machines.
"""

from __future__ import annotations

from ._backend import Backend as Backend
from ._backend_values import PLACES as PLACES
from ._backend_values import AddMode as AddMode
from ._backend_values import AddResult as AddResult
from ._backend_values import CancelResult as CancelResult
from ._backend_values import Claim as Claim
from ._backend_values import NewJob as NewJob
from ._backend_values import Receipt as Receipt
from ._backend_values import Renewal as Renewal
from ._backend_values import SweepReport as SweepReport
from ._backends.memory._backend import MemoryBackend as MemoryBackend
from ._backends.redis._backend import RedisBackend as RedisBackend
from ._backends.redis._current import current_redis as current_redis
from ._backends.redis._queue_info import QueueInfo as QueueInfo
from ._backends.redis._queue_settings import QueueSettings as QueueSettings
from ._backends.redis._sharded import ShardedBackend as ShardedBackend
from ._backends.redis._stream import StreamSource as StreamSource
from ._current import current_backend as current_backend
from ._current import report_progress as report_progress
from ._exceptions import BackendOutOfMemory as BackendOutOfMemory
from ._exceptions import BackendRefused as BackendRefused
from ._exceptions import BackendUnavailable as BackendUnavailable
from ._exceptions import ConfigurationError as ConfigurationError
from ._exceptions import DependencyNotFound as DependencyNotFound
from ._exceptions import Drop as Drop
from ._exceptions import IdempotencyConflict as IdempotencyConflict
from ._exceptions import InvalidTransition as InvalidTransition
from ._exceptions import JobNotFound as JobNotFound
from ._exceptions import MemoryFull as MemoryFull
from ._exceptions import QueueFull as QueueFull
from ._exceptions import Retry as Retry
from ._exceptions import TrioqueueError as TrioqueueError
from ._exceptions import UnknownTask as UnknownTask
from ._job_input import JobOptions as JobOptions
from ._metrics import Gauges as Gauges
from ._metrics import HistogramSnapshot as HistogramSnapshot
from ._metrics import Metrics as Metrics
from ._metrics import MetricsSnapshot as MetricsSnapshot
from ._payload import PRIORITIES as PRIORITIES
from ._payload import reply_id as reply_id
from ._pool._config import ShutdownReport as ShutdownReport
from ._pool._handlers import Handler as Handler
from ._pool._handlers import Handlers as Handlers
from ._pool._handlers import Middleware as Middleware
from ._pool._handlers import dispatch as dispatch
from ._pool._lifecycle import open_worker_pool as open_worker_pool
from ._pool._worker_pool import WorkerPool as WorkerPool
from ._queue import Queue as Queue
from ._rate import RateLimit as RateLimit
from ._rate import RateLimits as RateLimits
from ._records import ErrorInfo as ErrorInfo
from ._records import Job as Job
from ._records import JobRecord as JobRecord
from ._records import JobState as JobState
from ._records import Retention as Retention
from ._result_errors import JobCancelled as JobCancelled
from ._result_errors import JobDropped as JobDropped
from ._result_errors import JobFailed as JobFailed
from ._result_errors import NoResult as NoResult
from ._result_errors import ResultNotStored as ResultNotStored
from ._retry import RetryPolicy as RetryPolicy
from ._schedule import MissedTicks as MissedTicks
from ._schedule import Schedule as Schedule
from ._scheduler import Scheduler as Scheduler
from ._scheduler import open_scheduler as open_scheduler
from ._task import Task as Task
from ._task import task as task
from ._util import fixup_module_metadata
from ._util import public_dir as _public_dir

__version__ = "0.1.0.dev0"

__all__ = [
    "PLACES",
    "PRIORITIES",
    "AddMode",
    "AddResult",
    "Backend",
    "BackendOutOfMemory",
    "BackendRefused",
    "BackendUnavailable",
    "CancelResult",
    "Claim",
    "ConfigurationError",
    "DependencyNotFound",
    "Drop",
    "ErrorInfo",
    "Gauges",
    "Handler",
    "Handlers",
    "HistogramSnapshot",
    "IdempotencyConflict",
    "InvalidTransition",
    "Job",
    "JobCancelled",
    "JobDropped",
    "JobFailed",
    "JobNotFound",
    "JobOptions",
    "JobRecord",
    "JobState",
    "MemoryBackend",
    "MemoryFull",
    "Metrics",
    "MetricsSnapshot",
    "Middleware",
    "MissedTicks",
    "NewJob",
    "NoResult",
    "Queue",
    "QueueFull",
    "QueueInfo",
    "QueueSettings",
    "RateLimit",
    "RateLimits",
    "Receipt",
    "RedisBackend",
    "Renewal",
    "ResultNotStored",
    "Retention",
    "Retry",
    "RetryPolicy",
    "Schedule",
    "Scheduler",
    "ShardedBackend",
    "ShutdownReport",
    "StreamSource",
    "SweepReport",
    "Task",
    "TrioqueueError",
    "UnknownTask",
    "WorkerPool",
    "current_backend",
    "current_redis",
    "dispatch",
    "open_scheduler",
    "open_worker_pool",
    "reply_id",
    "report_progress",
    "task",
]

fixup_module_metadata(__name__, globals())
del fixup_module_metadata


def __dir__() -> list[str]:
    """The public names: see `trioqueue._util.public_dir`."""
    return _public_dir(__all__, globals())
