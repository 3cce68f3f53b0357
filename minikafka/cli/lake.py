"""The ``lake`` commands: Iceberg tables committed with the ledger (list, sync, clean)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..errors import LakeError
from .app import main
from .common import echo_json, json_option, with_source

if TYPE_CHECKING:  # the API is imported by the call that opens a Source, not by every command
    from ..api.source import Source


@main.group()
def lake() -> None:
    """Lake tables (Iceberg) whose catalog lives in the ledger: list, sync, clean.

    A pipeline file's [lake.NAME] table mirrors a topic; every stage commit that writes the
    topic appends to the table in the same transaction (docs/how-to/lake-tables.md).

    Example: minikafka lake list --source data/homelab.sqlite
    """


def _row(r) -> dict:
    return {"name": r.name, "format": r.format, "topic": r.topic, "location": r.location,
            "namespace": r.namespace, "partition_by": list(r.partition_by), "last_id": r.last_id,
            "snapshot_id": r.snapshot_id, "run_id": r.run_id, "updated_at": r.updated_at}


@lake.command("list")
@json_option
@with_source(read_only=True)
def list_(source: Source, as_json: bool) -> None:
    """List the lake targets: topic, location, the last row id and snapshot each holds.

    Example: minikafka lake list --json -s data/homelab.sqlite
    """
    from ..ledger.lake import list_targets

    rows = [_row(r) for r in list_targets(source.ledger.conn)]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no lake targets (declare one as [lake.NAME] in the pipeline file)")
    for r in rows:
        click.echo(f"{r['name']:20} {r['format']} {r['topic']} -> {r['location']}  rows up to id {r['last_id']}, "
                   f"snapshot {r['snapshot_id'] or '-'} ({r['updated_at'] or 'never written'})")


def _target(source: Source, name: str):
    """The target NAME as the ledger holds it; a --pipeline file's [lake.NAME] is declared first."""
    from ..ledger.lake import declare, read_target, target_of_row

    defn = click.get_current_context().meta.get("minikafka.pipeline")
    if defn is not None and name in getattr(defn, "lake", {}):
        declare(source.ledger, [defn.lake[name]])
    row = read_target(source.ledger.conn, name)
    if row is None:
        raise click.ClickException(f"no lake target {name!r} in {source.path} (see 'minikafka lake list')")
    return target_of_row(row)


@lake.command("sync")
@click.argument("name")
@json_option
@with_source
def sync_(source: Source, name: str, as_json: bool) -> None:
    """Append the rows of NAME's topic that the table does not hold yet, in one transaction
    with a run row (rows appended outside a stage, or a target declared after its topic filled).

    Example: minikafka lake sync scored -p conf/homelab-lake.toml
    """
    from ..ledger.lake import sync

    try:
        result = sync(source.ledger, _target(source, name))
    except LakeError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json({"target": result.target, "rows": result.rows, "snapshot_id": result.snapshot_id,
                   "last_id": result.last_id})
        return
    click.echo(f"{name}: {result.rows} row(s) appended, the table holds the topic up to id {result.last_id}"
               + (f" (snapshot {result.snapshot_id})" if result.snapshot_id else ""))


@lake.command("clean")
@click.argument("name")
@click.option("--dry-run", is_flag=True, help="Only list the orphan files.")
@json_option
@with_source
def clean(source: Source, name: str, dry_run: bool, as_json: bool) -> None:
    """Delete the files of NAME's table that no snapshot refers to: what commits that rolled
    back or were killed left behind. Runs under the ledger's write lock, so it is safe while
    stages commit (every commit writes its files holding that lock).

    Example: minikafka lake clean scored --dry-run -p conf/homelab-lake.toml
    """
    from ..ledger.lake import remove_orphans

    try:
        files = remove_orphans(source.ledger, name, dry_run=dry_run)
    except LakeError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json({"target": name, "dry_run": dry_run, "files": files})
        return
    for path in files:
        click.echo(("would delete " if dry_run else "deleted ") + path)
    click.echo(f"{name}: {len(files)} orphan file(s)" + (" (dry run, nothing deleted)" if dry_run else " deleted"))
