"""The Redis backends: the reliable list, the stream source and the sharded queue.

The connection and its clients (``_connection``, ``_client``, ``_hiredis`` on
``_resp`` and ``_resp_cluster``, ``_glide``, ``_coredis``), the URL and the
key layout (``_url``, ``_probe``, ``_keys``), the Lua scripts (``_scripts``,
``lua/``), and the backends built on them (``_backend``, ``_stream``,
``_sharded``).
"""
