"""Redis Cluster: a queue on a cluster, one whose enqueues wait for a replica, a sharded one.

Each function makes a backend as the page shows it; none reaches Redis before its
first call. The URL names nodes of the cluster, any one of which may be down when a
process starts: `TRIOQUEUE_REDIS_URL` names them, as for every command (the tests give
their own).
"""

import os

import trioqueue

NODE = os.environ.get(
    "TRIOQUEUE_REDIS_URL", "redis://node-1:7000,node-2:7000,node-3:7000?cluster=yes"
)


def on_a_cluster(url: str = NODE) -> trioqueue.RedisBackend:
    """One queue; its keys share the slot of its hash tag, ``{thumbnails}``."""
    return trioqueue.RedisBackend(url, queue="{thumbnails}", min_idle=30)


def with_a_replica(url: str = NODE) -> trioqueue.RedisBackend:
    """The same queue, each enqueue returning once a replica has its jobs."""
    return trioqueue.RedisBackend(url, queue="{thumbnails}", min_idle=30, wait_replicas=1)


def sharded(url: str = NODE) -> trioqueue.ShardedBackend:
    """One logical queue over three, ``{thumbnails:0}`` to ``{thumbnails:2}``."""
    return trioqueue.ShardedBackend.on_redis(url, queue="thumbnails", shards=3, min_idle=30)
