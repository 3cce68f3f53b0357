"""The run's questions to its ledger: open it with every topic and consumer, what a stage has pending.

The scheduler opens the ledger once (``open_source``) and registers every stage's consumer in one
transaction; a stage's own process (``minikafka.job``) opens it again with the ids it was given.
"""

from __future__ import annotations

from pathlib import Path

from ..api.source import Source
from ..ledger.consuming import read_runs
from .definition import PipelineDefinition, StageDefinition


def open_source(defn: PipelineDefinition, *, create: bool = True, register: bool = True,
                notes: list[str] | None = None, registered: dict[tuple[str, str], int] | None = None,
                topics: list[str] | None = None) -> Source:
    """Open the pipeline's ledger with every topic created/checked and every consumer registered.

    Consumers are registered before any stage runs, each new one at its stage's ``start``
    (earliest: every row of its inputs). ``create=False``: a missing file is a
    LedgerNotFoundError; a missing directory is never created (``minikafka run --create``
    does that). ``register=False`` (dry runs, ``check``, ``plot``): nothing is registered,
    a run that commits nothing leaves no consumer behind. ``notes`` receives a line for
    each consumer registered now that starts past rows that exist (``start_notes``);
    ``registered`` receives each consumer's id by (stage, input topic), so a stage run later
    needs not register or look it up again. ``topics``: only these topics are opened (a
    stage's process that the runner started: the runner created and checked them all).
    """
    source = Source(str(defn.source), create=create)
    try:
        for t in defn.topics.values():
            if topics is None or t.name in topics:
                _open_declared(source, t)
        if register and defn.lake:  # lake targets of the pipeline file, recorded before any stage commits
            from ..ledger.lake import declare

            declare(source.ledger, defn.lake.values())
        if register:
            lines = register_stage_consumers(source, defn, registered=registered)
            if notes is not None:
                notes.extend(lines)
    except BaseException:
        source.close()
        raise
    return source


def _open_declared(source: Source, t) -> None:
    if t.is_table:  # [tables]: created as a keyed table, or checked against the stored one
        source.table(t.name, t.model, key=t.table_key, merge=t.merge or None)
    else:
        source.topic(t.name, t.model, dedup=t.dedup or None, partitions=t.partitions, key=t.key,
                     evolve=t.schema_changes == "evolve").unknown_fields = t.unknown_fields


def create_declared(source: Source, defn: PipelineDefinition) -> list[str]:
    """Create every topic the pipeline declares that the ledger lacks yet; the names created.

    What a command given ``--pipeline`` that writes does first, before any JVM: a declared
    topic is usable on a fresh ledger (``backfill`` into it needs no ``run --create``). The
    topics already stored are not reopened here: a command checks the ones it uses, so a
    model changed since (a migration to run) stops only what reads that topic.
    """
    stored = set(source.topics())
    made = []
    for t in defn.topics.values():
        if t.name not in stored:
            _open_declared(source, t)
            made.append(t.name)
    return made


def start_hint(defn: PipelineDefinition, *, flag: bool = False) -> str:
    """How a pipeline's missing ledger starts, in one clause (with every declared topic in it).

    ``flag``: the command itself takes ``--create`` (it says so instead of naming ``run``).
    """
    first = ("--create starts it there (and its directory)" if flag
             else f"'minikafka run {defn.path} --create' starts it (no JVM when nothing is pending)")
    return (f"{first} with every declared topic, as does the first 'minikafka ingest' or "
            "'minikafka backfill --pipeline' into a declared topic")


def register_stage_consumers(source: Source, defn: PipelineDefinition, *, dry_run: bool = False,
                             registered: dict[tuple[str, str], int] | None = None) -> list[str]:
    """Register every stage's consumer on its inputs in one transaction (``dry_run``: only say
    what registering would do); return a line for each new one that starts past existing rows:
    ``stage X: consumer starts at offset N of topic 'T', M earlier rows are skipped (start=latest)``.
    """
    from ..ledger.topics import acks
    from ..util.clock import utc_now

    now = utc_now()
    lines = []
    with source.ledger.atomic() as conn:
        for sd in defn.stages:
            for name in sd.inputs:
                if dry_run:
                    reg = acks.planned_registration(conn, name, sd.consumer, start=sd.start)
                else:
                    reg = acks.register_in_current_transaction(conn, name, sd.consumer, now, start=sd.start)
                    if registered is not None:
                        registered[(sd.name, name)] = reg.consumer_id
                note = reg.note(f"stage {sd.name}")
                if note:
                    lines.append(note + (" (dry run: nothing registered)" if dry_run else ""))
    return lines


def require_ledger(defn: PipelineDefinition) -> None:
    """A run never starts a ledger: a typo in ``source =`` must not 'succeed' with 0 rows.

    Raises:
        LedgerNotFoundError: no file at the pipeline's ``source``.
    """
    from ..errors import LedgerNotFoundError

    if not Path(defn.source).is_file():
        raise LedgerNotFoundError(
            f"no ledger at {defn.source}: check 'source =' in {defn.path} (or --source); {start_hint(defn)}",
            path=str(defn.source))


def stage_ids(registered: dict[tuple[str, str], int], sd: StageDefinition) -> dict[str, int]:
    """{input: the stage's consumer id} of the consumers ``open_source`` registered."""
    return {name: registered[(sd.name, name)] for name in sd.inputs if (sd.name, name) in registered}


def has_pending(defn: PipelineDefinition, sd: StageDefinition) -> bool:
    """The stage has rows to read now (asked on a connection of its own)."""
    with Source(str(defn.source)) as source:
        return bool(pending_in(source, defn, sd))


def pending_in(source: Source, defn: PipelineDefinition, sd: StageDefinition,
                registered: dict[tuple[str, str], int] | None = None) -> int:
    """The rows the stage has to read now (a consumer not registered yet: from its stage's start).
    ``registered``: the consumers' ids by (stage, input), as ``open_source`` gives them."""
    from ..ledger.topics import find_consumer, lag

    rows = 0
    for name in sd.inputs:
        consumer_id = (registered or {}).get((sd.name, name))
        if consumer_id is None:
            consumer_id = find_consumer(source.ledger.conn, name, sd.consumer)
        # a consumer not registered yet (a dry run registers none) would start at its stage's start
        rows += sum(lag(source.ledger.conn, name, consumer_id, start=sd.start).values())
    return rows


def run_row(source: Source, run_id: str) -> dict | None:
    """The run log's row of ``run_id`` (None: the run wrote none)."""
    rows = read_runs(source.ledger.conn, run_id=run_id, limit=1)
    return rows[0] if rows else None
