"""The ``trioqueue`` command line: a parser module per group of commands, a module per command run.

``_main`` runs it (the ``trioqueue`` script's entry point); ``_parser`` and the
``_commands_*`` modules define the arguments; the argument types and the shared
Redis options are in ``_types``, ``_loading`` and ``_redis_args``; each command runs
in its own module, imported only when that command runs.
"""
