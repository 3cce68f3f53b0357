"""The Python API, in three rooms: ``core`` (TopicRows, Record, transactions, notifications,
engines) < ``modes`` (pipes, queues and workers, groups, streaming, windows, attach,
retention) < the face (``source``, ``topic``, ``streams``).

Uses the ledger, never an engine: Spark is reached through ``core.engines``, which the
package root fills in.
"""
