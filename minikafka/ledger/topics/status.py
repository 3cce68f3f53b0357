"""What 'handled' means, in SQL: the expressions every reader of the ack state uses.

A topic table holds the messages only; their state is positions and acks in the ledger's
own tables (acks.py writes them):

- ``_minikafka_partitions.handled_upto`` (per topic partition): every row at or below it
  was handled *for every consumer* by a topic-wide ack (``set_handled`` without a
  consumer, rows appended as handled); ``_minikafka_handled``: such rows above it
  (acked out of order).
- ``_minikafka_offsets.committed`` (per consumer and partition): every row at or below it
  is done for that consumer; ``_minikafka_acks``: its rows acked above it.

A row is done for a consumer when it is handled for everyone or the consumer is past it
(offset or ack). Topic-wide a row is 'handled' when it is handled for everyone, or when
at least one consumer is registered and every one of them is past it; otherwise 'new'.

Each topic has two views that apply exactly these rules for readers outside the package
(the ``sqlite3`` shell, Datasette, a JDBC read): ``"<topic>:status"`` (the topic's columns
plus ``_status``) and ``"<topic>:consumers"`` (one row per row and consumer: ``_id``,
``_partition``, ``consumer``, ``_status``). ``:`` is not allowed in topic names, so a view
name never collides with a topic.

Templates below hold ``{T}`` (the topic name), ``{C}`` (a consumer id) and ``{P}`` (the
row's partition: ``"_partition"``, or ``0`` for a topic with one partition, which lets
SQLite evaluate the position lookups once per statement). ``"_id"`` and ``"_partition"``
name the topic table's columns (no ledger table has columns of those names).
"""

from __future__ import annotations

import re

from .identifiers import quote_identifier, validate_topic_name

STATUS_VIEW_SUFFIX = ":status"
CONSUMERS_VIEW_SUFFIX = ":consumers"

# handled for every consumer: below the partition's position, or marked out of order
EXPLICIT = (
    '("_id" <= coalesce((SELECT p.handled_upto FROM _minikafka_partitions p WHERE p.topic = {T} '
    'AND p.partition = {P}), 0) OR EXISTS (SELECT 1 FROM _minikafka_handled h WHERE h.topic = {T} '
    'AND h.row_id = "_id"))'
)
# consumer {C} is past the row: its committed offset covers it, or it acked it
PAST = (
    '("_id" <= coalesce((SELECT o.committed FROM _minikafka_offsets o WHERE o.consumer_id = {C} '
    'AND o.partition = {P}), 0) OR EXISTS (SELECT 1 FROM _minikafka_acks a WHERE a.consumer_id = {C} '
    'AND a.row_id = "_id"))'
)
_PAST_K = PAST.replace("{C}", "k.id")
# at least one consumer is registered and every one is past the row
ALL_PAST = (
    "(EXISTS (SELECT 1 FROM _minikafka_consumers k WHERE k.topic = {T}) AND NOT EXISTS "
    f"(SELECT 1 FROM _minikafka_consumers k WHERE k.topic = {{T}} AND NOT {_PAST_K}))"
)
HANDLED = f"({EXPLICIT} OR {ALL_PAST})"
DONE_FOR = f"({EXPLICIT} OR {PAST})"
STATUS = f"CASE WHEN {HANDLED} THEN 'handled' ELSE 'new' END"
# when the row became handled: exact for rows acked out of order; for rows a position
# covers, the time that position last moved
HANDLED_AT = (
    f"CASE WHEN {EXPLICIT} THEN coalesce((SELECT h.handled_at FROM _minikafka_handled h WHERE h.topic = {{T}} "
    "AND h.row_id = \"_id\"), (SELECT p.updated_at FROM _minikafka_partitions p WHERE p.topic = {T} "
    f"AND p.partition = {{P}})) WHEN {ALL_PAST} THEN (SELECT max(coalesce((SELECT a.acked_at FROM _minikafka_acks a "
    "WHERE a.consumer_id = k.id AND a.row_id = \"_id\"), (SELECT o.updated_at FROM _minikafka_offsets o "
    "WHERE o.consumer_id = k.id AND o.partition = {P}))) FROM _minikafka_consumers k WHERE k.topic = {T}) END"
)
# lower bounds on the ids of rows still to do (uncorrelated: SQLite starts its rowid range there)
LOWEST_PENDING_FOR = (
    "coalesce((SELECT min(max(coalesce(o.committed, 0), p.handled_upto)) FROM _minikafka_partitions p "
    "LEFT JOIN _minikafka_offsets o ON o.consumer_id = {C} AND o.partition = p.partition WHERE p.topic = {T}), 0)"
)
LOWEST_PENDING = (
    "coalesce((SELECT min(max(p.handled_upto, coalesce((SELECT min(o.committed) FROM _minikafka_offsets o "
    "JOIN _minikafka_consumers k ON k.id = o.consumer_id WHERE k.topic = {T} AND o.partition = p.partition), 0))) "
    "FROM _minikafka_partitions p WHERE p.topic = {T}), 0)"
)

_MARK = re.compile(r"\{([TCP])\}")
PARTITION_COLUMN = '"_partition"'


def topic_literal(topic: str) -> str:
    """``topic`` as an SQL string literal (for DDL, where no parameter can go).

    Raises:
        InvalidNameError: not a valid topic name (valid names hold no quote).
    """
    validate_topic_name(topic)
    return "'" + topic.replace("'", "''") + "'"


def render(template: str, topic: str, consumer_id: int | str | None = None, partition: str = PARTITION_COLUMN) -> str:
    """The template with the topic as a literal and the consumer id inlined (an integer the
    ledger produced, or an SQL expression such as ``k.id``)."""
    values = {"T": topic_literal(topic), "P": partition}
    if consumer_id is not None:
        values["C"] = str(int(consumer_id)) if isinstance(consumer_id, int) else consumer_id
    return _MARK.sub(lambda m: values[m.group(1)], template)


def bind(template: str, topic: str | None, consumer_id: int | None = None,
         partition: str = PARTITION_COLUMN) -> tuple[str, tuple]:
    """The template with ``?`` for the topic and the consumer id, and their parameters in order.

    ``topic`` None: the consumer's own topic (a subquery on its id).
    """
    params: list = []

    def one(m: re.Match) -> str:
        kind = m.group(1)
        if kind == "P":
            return partition
        if kind == "C":
            params.append(consumer_id)
            return "?"
        if topic is None:
            params.append(consumer_id)
            return "(SELECT c.topic FROM _minikafka_consumers c WHERE c.id = ?)"
        params.append(topic)
        return "?"

    return _MARK.sub(one, template), tuple(params)


def status_view_name(topic: str) -> str:
    return topic + STATUS_VIEW_SUFFIX


def consumers_view_name(topic: str) -> str:
    return topic + CONSUMERS_VIEW_SUFFIX


def view_ddl(topic: str, table: str | None = None) -> list[str]:
    """CREATE VIEW statements of the topic's two status views (over ``table``, default the topic's)."""
    t = quote_identifier(table or topic)
    return [
        f"CREATE VIEW {quote_identifier(status_view_name(topic))} AS SELECT *, "
        f"{render(STATUS, topic)} AS \"_status\" FROM {t}",
        f"CREATE VIEW {quote_identifier(consumers_view_name(topic))} AS SELECT \"_id\", \"_partition\", "
        f"k.name AS consumer, CASE WHEN {render(DONE_FOR, topic, 'k.id')} THEN 'handled' ELSE 'new' END "
        f"AS \"_status\" FROM {t} JOIN _minikafka_consumers k ON k.topic = {topic_literal(topic)}",
    ]


def drop_view_ddl(topic: str) -> list[str]:
    """DROP VIEW statements of the topic's status views (before its table is dropped or replaced:
    SQLite refuses to rename a table while a view names a table that is gone)."""
    return [f"DROP VIEW IF EXISTS {quote_identifier(name)}"
            for name in (status_view_name(topic), consumers_view_name(topic))]
