"""The SQLite file and nothing above it, in five rooms, lowest first: topic storage
(``topics/``), consumption state (``consuming/``), the open file with its transactions and
wake-ups (``transactions/``), file care (``files/``) and lake tables (``lake/``). Each room's ``__init__`` is its face,
naming what the layers above may use; they import the faces, never a room's modules.

- ``topics/``: names, typed columns, dedup keys, layouts and the catalog, a topic's rows
  (``TopicTable``), the ack positions each row's status is read from, counts, filters.
- ``consuming/``: consumers, groups, queues and schedules, windows, deliveries,
  notifications, the quarantine, the run log, retention, backfill progress, health figures,
  and the read models the CLI and the console both show.
- ``transactions/``: the connection with the schema and upgrades it applies, the commits of
  stages and backfills, group commit, events, wake-ups, one short read transaction.
- ``files/``: backups and restores as runs, snapshots, copies, Litestream.
- ``lake/``: Iceberg tables whose catalog rows live in the ledger, committed in a stage's
  transaction (extra ``lake``); their orphan files.

A room imports only the rooms below it (tests/test_layers.py). Imports only
``minikafka.errors`` and ``minikafka.util``.
"""
