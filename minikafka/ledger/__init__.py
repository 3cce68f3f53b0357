"""The SQLite file and nothing above it.

Connection and pragmas (``connection``), the catalog and table layout (``catalog``,
``layout``, ``columns``), names (``identifiers``), ack state (``acks``), the run log
(``runlog``), the one commit transaction of stages (``commit``), Arrow export of stored
rows (``arrow``) and after-commit events (``events``). Imports only ``minikafka.errors``
and ``minikafka.util``.
"""
