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
    """Lake tables (Iceberg, Delta, Parquet exports) kept with the ledger: list, sync, clean,
    compact, expire.

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
    """Delete the files of NAME's table that no commit holds: what commits that rolled back or
    were killed left behind (Iceberg: no snapshot reaches them; Delta: no action of the log
    names them; Parquet export: above the committed last id). Runs under the ledger's write
    lock, so it is safe while stages commit (every commit writes its files holding that lock).

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


@lake.command("compact")
@click.argument("name")
@click.option("--max-files", type=click.IntRange(min=1), default=2, show_default=True,
              help="Compact when a partition holds more data files than this.")
@click.option("--dry-run", is_flag=True, help="Only say what compaction would do.")
@json_option
@with_source
def compact_(source: Source, name: str, max_files: int, dry_run: bool, as_json: bool) -> None:
    """Rewrite NAME's Iceberg table into one file per partition once a partition holds more
    than --max-files files: one new snapshot, committed in a ledger transaction (safe while
    stages commit; they wait for it). Then 'lake expire' and 'lake clean' free the old files.

    Example: minikafka lake compact scored --dry-run -p conf/homelab-lake.toml
    """
    from ..ledger.lake import compact

    try:
        result = compact(source.ledger, name, max_files=max_files, dry_run=dry_run)
    except LakeError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json(result.__dict__)
        return
    what = ("compacted" if result.done else "would compact" if dry_run and result.most_files_in_a_partition > max_files
            else "nothing to compact")
    click.echo(f"{name}: {what}: {result.files_before} data file(s), at most {result.most_files_in_a_partition} "
               f"in a partition" + (f" -> {result.files_after} file(s)" if result.done else ""))


@lake.command("expire")
@click.argument("name")
@click.option("--older-than", "older_than", required=True, metavar="AGE",
              help="Expire the snapshots taken longer ago than AGE (7d, 12h); the current one always stays.")
@click.option("--dry-run", is_flag=True, help="Only count the snapshots it would expire.")
@json_option
@with_source
def expire_(source: Source, name: str, older_than: str, dry_run: bool, as_json: bool) -> None:
    """Expire the old snapshots of NAME's Iceberg table (committed in a ledger transaction);
    the files only they referenced are then removed by 'lake clean'.

    Example: minikafka lake expire scored --older-than 7d --dry-run -p conf/homelab-lake.toml
    """
    from datetime import UTC, datetime

    from ..errors import InvalidDurationError
    from ..ledger.lake import expire_snapshots
    from ..util.duration import parse_timedelta

    try:
        cutoff = datetime.now(UTC) - parse_timedelta(older_than, what="--older-than")
    except InvalidDurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    try:
        result = expire_snapshots(source.ledger, name, older_than=cutoff, dry_run=dry_run)
    except LakeError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json(result.__dict__)
        return
    click.echo(f"{name}: {result.snapshots_expired} snapshot(s) " + ("would be expired" if dry_run else "expired"))
