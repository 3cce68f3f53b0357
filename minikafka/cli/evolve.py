"""``minikafka evolve``: bring a topic to a new model in place (fields added), or say what a rewrite does."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from .app import main
from .common import echo_json, json_option, pipeline_model, with_source

if TYPE_CHECKING:
    from ..api.source import Source


@main.command()
@click.argument("topic")
@click.option("--model", metavar="module:Class",
              help="The topic's new model (default: the one --pipeline declares for TOPIC).")
@click.option("--dry-run", is_flag=True, help="Only say what would change (and how many rows a rewrite touches).")
@json_option
@with_source(read_only=lambda kwargs: kwargs["dry_run"])
def evolve(source: Source, topic: str, model: str | None, dry_run: bool, as_json: bool) -> None:
    """Add a model's new fields to a topic in place, without rewriting a row.

    Fields that are Optional or have a default are added in O(1) whatever the row count
    (old rows read NULL or the default), the stored schema updated in the same transaction.
    Removing, retyping or requiring a field rewrites every row: that is Topic.migrate();
    --dry-run says which fields it changes and how many rows it rewrites (exit 0), without
    --dry-run such a change is refused (exit 1) and nothing is written.

    --json prints {topic, kind, changes, rows, applied, seconds}; kind is same, additive,
    older (the model lacks fields the topic gained) or rewrite. Without --model, the model
    --pipeline declares for TOPIC. See docs/how-to/schema-evolution.md.

    Example: minikafka evolve rss.items --pipeline conf/homelab.toml --dry-run
    """
    from ..errors import SchemaMismatchError
    from ..ledger.topics import evolution
    from .data import import_model

    cls = import_model(model) if model else pipeline_model(topic)
    if cls is None:
        raise click.UsageError(f"which model? pass --model module:Class, or --pipeline FILE declaring {topic!r}")
    started = time.perf_counter()
    plan = source.evolve(topic, cls, dry_run=True)
    applied = False
    if not dry_run and plan.kind == evolution.ADDITIVE:
        try:
            plan = source.evolve(topic, cls)
        except SchemaMismatchError as exc:  # another process changed the topic meanwhile
            raise click.ClickException(str(exc)) from exc
        applied = True
    seconds = round(time.perf_counter() - started, 4)
    if as_json:
        echo_json({"topic": topic, "kind": plan.kind, "changes": plan.describe(), "rows": plan.rows,
                   "applied": applied, "seconds": seconds})
    else:
        for line in plan.describe():
            click.echo(line)
        if plan.kind == evolution.ADDITIVE:
            click.echo(f"topic {topic!r}: {len(plan.added)} field(s) added in {seconds:.3f} s, no row rewritten"
                       if applied else f"dry run: {len(plan.added)} field(s) would be added in place; nothing written")
    if plan.kind == evolution.REWRITE and not dry_run:
        raise click.ClickException(f"topic {topic!r}: not an additive change, nothing was written; "
                                   "Topic.migrate(NewModel, fn) rewrites the rows")
