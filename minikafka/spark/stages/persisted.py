"""What a stage persisted, released when the stage ends: the stage's frames, not the engine's cache.

A stage persists frames (the rows its checks key, whatever its transform persists) and drops
them once staged. On a classic session (``--in-process``, spark-submit) the session is the
process's own, so ``catalog.clearCache()`` does it. On a warm engine the cache is the server's,
shared by every session: ``clearCache()`` there would also drop what a concurrent stage still
reads (its keyed rows, recomputed with other row keys) and the lookups the engine keeps in
memory across runs (``lookup.py``). So on a Connect session :class:`Persisted` watches the
session's ``persist`` calls from when it starts (the lookups are persisted before) and
``release()`` unpersists exactly those. ``CACHE TABLE`` in a transform's SQL is not watched: it
stays cached until uncached or the engine stops.
"""

from __future__ import annotations

from ..engine import is_connect


class Persisted:
    """The frames persisted on ``spark`` from now on, until :meth:`release`."""

    def __init__(self, spark) -> None:
        self.spark = spark
        self.relations: list = []
        self._analyze = None
        client = getattr(spark, "client", None) if spark is not None and is_connect(spark) else None
        original = getattr(client, "_analyze", None)
        if original is None:  # classic, or a Connect client without the call watched: clearCache() at release
            return
        self._analyze = original

        def watched(method: str, **kwargs):
            if method == "persist":
                self.relations.append(kwargs["relation"])
            return original(method, **kwargs)

        client._analyze = watched  # this session's client only

    def release(self) -> None:
        """Unpersist what was persisted (every cached frame of a classic session); stop watching."""
        if self.spark is None:
            return
        if self._analyze is None:
            self.spark.catalog.clearCache()
            return
        client = self.spark.client
        if client.__dict__.get("_analyze") is not None:
            del client._analyze  # back to the class's method
        relations, self.relations = self.relations, []
        for relation in relations:
            self._analyze("unpersist", relation=relation, blocking=False)
