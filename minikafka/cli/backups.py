"""Snapshots of the ledger: backup, restore."""

from __future__ import annotations

import click

from .app import main
from .common import echo_json, json_option
from .health import ledger_and_pipeline, ledger_options
from .output import note, progress


@main.command()
@click.argument("dest", metavar="DEST", type=click.Path(file_okay=False))
@ledger_options
@click.option("--keep", type=click.IntRange(min=1), metavar="N",
              help="Afterwards keep only the newest N snapshots of this ledger in DEST.")
@click.option("--full-check", is_flag=True,
              help="Check the copy with PRAGMA integrity_check (each index against its table too) "
                   "instead of PRAGMA quick_check; about twice the checking time.")
@json_option
def backup(dest: str, source_path: str | None, pipeline: str | None, keep: int | None, full_check: bool,
           as_json: bool) -> None:
    """Take a consistent snapshot of the ledger into directory DEST while it is in use.

    Stages, queues and appenders keep running: the copy is one consistent state (the
    file and its log copied under one read transaction, the log folded in), written under
    a temporary name, checked with PRAGMA quick_check (every page and b-tree; with
    --full-check PRAGMA integrity_check, which also compares each index with its table),
    checksummed (NAME.sha256, as sha256sum -c reads it), then renamed to
    <ledger>-backup-<UTC time>-<last committed run>.sqlite. A killed backup leaves no file
    with that name. The run leaves a row in the run log (kind backup).

    The snapshot carries the ledger's identity (an id stored in the ledger when it was
    created; its checksum file names it too), so --keep removes only this ledger's older
    snapshots, even beside another ledger's of the same file name. A run row that cannot be
    written does not fail a complete backup: it is a warning on stderr.

    --json prints {run_id, snapshot, taken_at, last_run, sha256, size_bytes, removed, seconds,
    checked, check, folded, ledger_id, warnings}.

    Example: minikafka backup backups/ --pipeline conf/homelab.toml --keep 7
    """
    from ..ledger.files import backup as take

    path, _ = ledger_and_pipeline(source_path, pipeline)
    with progress(f"backup {path}") as shown:
        result = take(path, dest, keep=keep, full_check=full_check, progress=shown.update)
    for warning in result.warnings:
        note(f"warning: {warning}")
    if as_json:
        echo_json(result.as_dict())
    else:
        click.echo(result.summary())


@main.command()
@click.argument("snapshot", metavar="SNAPSHOT", type=click.Path(exists=True))
@ledger_options
@click.option("--before-run", metavar="RUN_ID",
              help="With SNAPSHOT a directory: the newest snapshot taken before this run started.")
@click.option("--from-other-ledger", is_flag=True,
              help="Restore a snapshot FILE of another ledger (another identity) in place of this one; "
                   "the ledger keeps its own identity.")
@json_option
def restore(snapshot: str, source_path: str | None, pipeline: str | None, before_run: str | None,
            from_other_ledger: bool, as_json: bool) -> None:
    """Put a snapshot back in place of the ledger; the replaced file is kept beside it.

    SNAPSHOT is a snapshot file, or a backup directory: its newest snapshot of this ledger
    (by the ledger's identity, not its file name; a ledger that does not exist yet takes
    the snapshots of the one ledger there), or with --before-run the newest one taken
    before that run started. A snapshot of another ledger is refused unless
    --from-other-ledger. The snapshot's checksum and PRAGMA integrity_check (every index
    against its table too) are checked first. A missing directory of the ledger is
    created (a fresh machine); a full or read-only disk changes nothing.
    Refuses, changing nothing, while any process has the ledger open (a run, an
    appender, a worker, Litestream): stop them first. Says what it
    restored (taken when, last run) and where the old file went; the restore leaves a row
    in the restored ledger's run log (kind restore).

    --json prints {run_id, ledger, snapshot, taken_at, last_run, replaced}.

    Example: minikafka restore backups/ --pipeline conf/homelab.toml
    """
    from ..ledger.files import restore as put_back

    path, _ = ledger_and_pipeline(source_path, pipeline, must_exist=False)
    result = put_back(path, snapshot, before_run=before_run, from_other_ledger=from_other_ledger)
    if as_json:
        echo_json(result.as_dict())
    else:
        click.echo(result.summary())
