"""The Redis backends: the reliable list, the stream source and the sharded queue.

The connection (``_connection``, ``_hiredis`` on our own small client: the
wire protocol ``_resp``, its pool ``_resp_pool``, and the cluster's slot
routing ``_resp_cluster``), the URL and the key layout
(``_url``, ``_url_parts``, ``_keys``), the Lua scripts (``_scripts``,
``lua/``), and the backends built on them (``_backend``, ``_stream``,
``_sharded``).
"""
