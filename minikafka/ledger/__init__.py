"""The SQLite file and nothing above it, in four rooms, lowest first.

- ``topics/``: topic storage: names, typed columns, dedup keys, layouts and the catalog, a
  topic's rows (``TopicTable``), the ack positions each row's status is read from, counts,
  filters, paging.
- ``consuming/``: consumption state: consumers, groups, queues and schedules, windows,
  deliveries, notifications, the quarantine, the run log, retention, backfill progress.
- ``transactions/``: the open file (connection, schema, upgrades), the commits of stages and
  backfills, group commit, events, wake-ups, one short read transaction.
- ``files/``: file care: backups and restores as runs, snapshots, copies, Litestream.

A room imports only the rooms below it; each room's ``__init__`` is its face, naming what the
layers above may use, and they import those faces, never a room's modules
(tests/test_layers.py). Imports only ``minikafka.errors`` and ``minikafka.util``.
"""
