"""A stage's plan: what one read of the ledger fixes before Spark starts.

``plan_stage`` reads, in one transaction, the layouts of the stage's topics, registers
(or finds) its consumer on each input and takes each input's bounds: the high-watermark
and the rows pending for the consumer up to it, and each lookup's bounds (its high-water id
and row count: ``ledger.topics.lookups``), so lookups are read in the same snapshot. Spark then reads exactly those rows and
the commit settles exactly them (``ledger.transactions.commit``), with the same consumer ids: nothing
is asked twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...api.source import Source
from ...ledger.topics import LookupBounds, ReadBounds, TopicLayout, TopicTable, acks, asof, lookup_bounds
from ...ledger.transactions import identity
from ...util.clock import utc_now


@dataclass(frozen=True)
class StagePlan:
    """Layouts by topic, the consumer's id on each input (None: a dry run of a consumer
    not registered yet), each input's bounds, and the snapshot: {topic: high-water id} of
    every topic and keyed table in the file, read in the same transaction (an input's is
    the upper bound of its read), which the stage's context reads through."""

    consumer: str
    inputs: dict[str, TopicLayout]
    outputs: dict[str, TopicLayout]
    consumer_ids: dict[str, int | None]
    bounds: dict[str, ReadBounds]
    lookups: dict[str, TopicLayout] = field(default_factory=dict)
    lookup_bounds: dict[str, LookupBounds] = field(default_factory=dict)
    ledger_id: str | None = None  # the ledger's identity (a cached lookup's key)
    snapshot: dict[str, int] = field(default_factory=dict)

    @property
    def rows_in(self) -> int:
        return sum(b.rows for b in self.bounds.values())

    @property
    def watermarks(self) -> dict[str, int]:
        return {name: b.upto for name, b in self.bounds.items()}


def plan_stage(source: Source, stage, *, upto: dict[str, int] | None = None, dry_run: bool = False,
               layouts: dict[str, TopicLayout] | None = None,
               consumer_ids: dict[str, int] | None = None) -> StagePlan:
    """Fix a stage's plan in one transaction (see the module docstring).

    A dry run registers nothing: a consumer not registered yet is planned from where its
    ``start`` would put it. ``layouts``: the topics' layouts the caller read already;
    ``consumer_ids``: the consumer's id on inputs where the caller registered it already.

    Raises:
        TopicNotFoundError: an input or output topic is not in the ledger.
    """
    upto = upto or {}
    layouts = layouts or {}
    consumer_ids = consumer_ids or {}
    consumer = stage.consumer_name
    with source.ledger.atomic() as conn:
        inputs = {name: layouts.get(name) or source.layout(name) for name in stage.inputs}
        outputs = {name: layouts.get(name) or source.layout(name) for name in stage.outputs}
        now = utc_now()
        ids: dict[str, int | None] = {}
        for name in stage.inputs:
            if name in consumer_ids:
                ids[name] = consumer_ids[name]
            elif dry_run:
                ids[name] = acks.find_consumer(conn, name, consumer)
            else:
                ids[name] = acks.register_in_current_transaction(conn, name, consumer, now,
                                                                 start=stage.start).consumer_id
        bounds = {
            name: TopicTable(conn, layout).read_bounds(which="new", consumer_id=ids[name], upto=upto.get(name),
                                                       partitions=stage.topic_partitions, start=stage.start)
            for name, layout in inputs.items()
        }
        names = getattr(stage, "lookups", None) or []
        lookups = {name: layouts.get(name) or source.layout(name) for name in names}
        fixed = {name: lookup_bounds(conn, layout) for name, layout in lookups.items()}
        ledger_id = identity.read_identity(conn) if lookups else None
        snapshot = asof.high_waters(conn)
    snapshot.update({name: min(b.upto, snapshot.get(name, b.upto)) for name, b in bounds.items()})
    return StagePlan(consumer, inputs, outputs, ids, bounds, lookups, fixed, ledger_id, snapshot)
