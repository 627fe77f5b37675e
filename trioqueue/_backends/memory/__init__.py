"""The embedded backend: everything in this process, on Trio primitives.

A job held (``_entry``), the ready queue's priority levels (``_levels``), the
schedule of due times (``_due``), and the backend, split by job: its state and
bookkeeping (``_base``), adding, claiming, settling and inspecting, put together
in ``_backend``.
"""
