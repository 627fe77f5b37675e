"""The worker pool and its parts: claims in, handlers run, outcomes out, upkeep beside.

``_lifecycle`` opens and drains a pool (`open_worker_pool`); ``_worker_pool`` is the
`WorkerPool` and its attempts; ``_fetch`` claims into the channel, ``_outcomes``
reports what each attempt decided, ``_books`` keeps every claim held, ``_maintenance``
renews leases and sweeps, ``_outage`` and ``_heartbeat`` tell an outage or a pause
from a fault; ``_handlers`` and ``_config`` check what the user gives.
"""
