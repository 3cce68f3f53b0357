"""The nightly entry of any project: ingest the night's files, run the DAG, check health, keep logs.

``minikafka nightly PIPELINE`` (cron's one line) does, never two at a time (a lock in the log
directory: a second night exits 75 at once):

1. **ingest**: per topic, the files its ``ingest`` globs match (JSONL, CSV, Parquet; relative to
   the pipeline file), each once: a file is known by the hash of its content (and, gzip, of its
   bytes), noted in the ledger's load records (``ledger.consuming.loads``, as ``backfill`` notes its
   dumps) in the same transaction as its rows and its run row, so a file ingested or backfilled
   before is skipped, and a crash mid-file leaves nothing of it;
2. **run**: ``minikafka run PIPELINE`` (extra arguments go to it), its own process;
   then, when the pipeline declares keyed tables (``[tables]``), ``minikafka compact`` of them:
   superseded versions every consumer has read are deleted (``minikafka compact`` keeps what a
   stage run still in progress may read), so a table does not grow with every night's changes;
3. **health**: ``minikafka health --pipeline PIPELINE`` (``--notify`` URLs go to it);
4. **logs**: everything printed goes to ``nightly-YYYY-MM-DD.log`` in the log directory too
   (appended: one file per night), and only the newest ``keep_logs`` such files are kept.

A run row of kind ``nightly`` sums the night up (files, rows, the run's and health's exit codes).
Exit code: 0 ok, 1 a stage or an ingest failed, 2 a bad definition, 3 the run succeeded but a
health check fails, 75 another night holds the lock.
"""

from __future__ import annotations

import glob
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InputFileError, LockBusy, MinikafkaError
from ..util.filelock import exclusive_lock

BUSY = 75
HEALTH_FAILED = 3
LOCK_NAME = ".nightly.lock"
LOG_GLOB = "nightly-*.log"


@dataclass
class FileIngest:
    """One file of the night: ``ingested``, ``skipped`` (ingested before) or ``failed``."""

    topic: str
    path: Path
    status: str
    lines: int = 0
    appended: int = 0
    duplicates: int = 0
    quarantined: int = 0
    error: str | None = None


@dataclass
class Night:
    """What one night did."""

    pipeline: str
    files: list[FileIngest] = field(default_factory=list)
    run_exit: int | None = None
    compact_exit: int | None = None
    health_exit: int | None = None
    exit_code: int = 0
    log: Path | None = None
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    def summary(self) -> str:
        done = [f for f in self.files if f.status == "ingested"]
        rows = sum(f.appended for f in done)
        quarantined = sum(f.quarantined for f in done)
        health = {None: "not checked", 0: "ok"}.get(self.health_exit, "FAILING")
        run = {None: "not run", 0: "succeeded"}.get(self.run_exit, f"FAILED (exit {self.run_exit})")
        return (f"nightly {self.pipeline}: {len(done)} file(s) ingested ({rows} row(s) appended, {quarantined} "
                f"quarantined), {self.count('skipped')} already ingested, {self.count('failed')} failed; "
                f"run {run}; health {health}; exit {self.exit_code} ({self.seconds:.1f}s)")


def night_files(defn) -> list[tuple[str, Path]]:
    """(topic, file) for every file the topics' ``ingest`` globs match now, topic by topic, sorted."""
    out: list[tuple[str, Path]] = []
    for topic in defn.topics.values():
        seen: set[Path] = set()
        for pattern in topic.ingest:
            for match in sorted(glob.glob(pattern, recursive=True)):
                path = Path(match)
                if path.is_file() and path not in seen:
                    seen.add(path)
                    out.append((topic.name, path))
    return out


def ingest_night(defn, echo: Callable[[str], None]) -> list[FileIngest]:
    """Ingest every file of the night not ingested before (see the module docstring), one line each."""
    from ..connectors.ingest import ingest_file
    from ..ledger.consuming import RunResult, loads, new_run_id, write_run_in_current_transaction
    from ..util.clock import utc_now
    from ..util.dumpfiles import scan
    from .opening import open_source

    files = night_files(defn)
    if not files:
        globs = sum(len(t.ingest) for t in defn.topics.values())
        echo("ingest: no topic declares 'ingest' globs" if not globs else "ingest: no file matches the topics' globs")
        return []
    Path(defn.source).parent.mkdir(parents=True, exist_ok=True)  # the pipeline's own ledger may start here
    out: list[FileIngest] = []
    with open_source(defn) as source:
        for topic, path in files:
            shown = _shown(path, defn)
            try:
                scanned = scan(path)
            except InputFileError as exc:
                out.append(FileIngest(topic, path, "failed", error=str(exc)))
                echo(f"ingest {topic} {shown}: FAILED {exc}")
                continue
            hashes = [scanned.sha256] + ([scanned.raw_sha256] if scanned.raw_sha256 else [])
            states = loads.load_states(source.ledger.conn, topic)
            if any(states.get(h, (0, ""))[1] == loads.DONE for h in hashes):
                out.append(FileIngest(topic, path, "skipped"))
                echo(f"ingest {topic} {shown}: ingested before, skipped")
                continue
            stat = path.stat()
            run = RunResult(new_run_id(f"ingest-{topic}"), "ingest", stage=f"ingest:{topic}", inputs=[str(path)],
                            outputs=[topic], details={"sha256": scanned.sha256, "size": stat.st_size,
                                                      "mtime": stat.st_mtime, "by": "nightly"})

            def record(conn, r, run=run, topic=topic, hashes=hashes, path=path) -> None:
                run.rows_in, run.rows_out, run.rows_duplicate = r.rows, r.appended, r.duplicates
                run.rows_quarantined = r.quarantined
                run.finish("succeeded")
                loads.mark_done_in_current_transaction(conn, topic, [(h, path.name) for h in hashes], run.run_id,
                                                       utc_now())
                write_run_in_current_transaction(conn, run)

            try:
                r = ingest_file(source.opened(topic), path, record=record)
            except (MinikafkaError, OSError) as exc:  # nothing of the file was written: its failed run is
                run.finish("failed", str(exc))
                with source.ledger.atomic() as conn:
                    write_run_in_current_transaction(conn, run)
                out.append(FileIngest(topic, path, "failed", error=str(exc)))
                echo(f"ingest {topic} {shown}: FAILED {exc}")
                continue
            out.append(FileIngest(topic, path, "ingested", r.lines, r.appended, r.duplicates, r.quarantined))
            echo(f"ingest {topic} {r.summary(shown)}")
    return out


def _shown(path: Path, defn) -> str:
    try:
        return str(path.relative_to(Path(defn.path).resolve().parent))
    except ValueError:
        return str(path)


def _command(command: Sequence[str], args: Sequence[str], echo: Callable[[str], None]) -> int:
    """Run ``COMMAND ARGS`` (``minikafka``: its own process), each output line through ``echo``."""
    proc = subprocess.Popen([*command, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        echo(line.rstrip("\n"))
    return proc.wait()


def rotate_logs(log_dir: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` nightly logs (by their date in the name); the ones deleted."""
    logs = sorted(log_dir.glob(LOG_GLOB))
    gone = logs[:-keep] if keep > 0 else logs
    for old in gone:
        old.unlink(missing_ok=True)
    return gone


def run_night(pipeline: str | Path, *, command: Sequence[str], log_dir: str | Path, keep_logs: int = 30,
              run_args: Sequence[str] = (), notify: Sequence[str] = (), echo: Callable[[str], None] = print,
              today: Callable[[], datetime] | None = None) -> Night:
    """One night (see the module docstring); ``echo`` shows each line (the log gets it too).

    ``command``: how to start ``minikafka`` for the run and the health steps (the CLI gives
    ``python -m minikafka.cli`` of its own interpreter).

    Raises:
        LockBusy: another night holds the lock (nothing was done; the log says so).
    """
    now = (today or (lambda: datetime.now(timezone.utc)))()
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"nightly-{now:%Y-%m-%d}.log"
    night = Night(str(pipeline), log=log_path)
    t0 = time.perf_counter()
    with open(log_path, "a", encoding="utf-8") as log:
        def say(line: str) -> None:
            echo(line)
            log.write(line + "\n")
            log.flush()

        def stamp() -> str:
            return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

        try:
            with exclusive_lock(log_dir / LOCK_NAME, note=f"minikafka nightly {pipeline}"):
                _night(night, pipeline, command, run_args, notify, say, stamp)
        except LockBusy:
            say(f"{stamp()} another nightly run holds {log_dir / LOCK_NAME}; not starting")
            raise
        night.seconds = time.perf_counter() - t0
        say(night.summary())
        say(f"=== {stamp()} exit {night.exit_code}")
    rotate_logs(log_dir, keep_logs)
    return night


def _night(night: Night, pipeline, command, run_args, notify, say, stamp) -> None:
    from .definition import load_pipeline

    say(f"=== {stamp()} minikafka nightly {pipeline} {' '.join(run_args)}".rstrip())
    try:
        defn = load_pipeline(pipeline, check_jobs=False, suites=False)
    except MinikafkaError as exc:
        say(f"Error: {exc}")
        night.exit_code = 2
        return
    night.pipeline = defn.name
    say(f"=== {stamp()} ingest the night's files")
    try:
        night.files = ingest_night(defn, say)
    except MinikafkaError as exc:  # the ledger cannot be opened, a declared topic does not match it
        say(f"Error: {exc}")
        night.exit_code = 1
        return
    say(f"=== {stamp()} minikafka run {pipeline} {' '.join(run_args)}".rstrip())
    night.run_exit = _command(command, ["run", str(pipeline), *run_args], say)
    tables = sorted(name for name, t in defn.topics.items() if t.is_table)
    if night.run_exit != 2 and tables and Path(defn.source).is_file():
        say(f"=== {stamp()} minikafka compact --pipeline {pipeline} {' '.join(tables)}")
        night.compact_exit = _command(command, ["compact", "--pipeline", str(pipeline), *tables], say)
    if night.run_exit != 2:
        say(f"=== {stamp()} minikafka health --pipeline {pipeline}")
        notify_args = [a for url in notify for a in ("--notify", url)]
        night.health_exit = _command(command, ["health", "--pipeline", str(pipeline), *notify_args], say)
    failed_ingest = any(f.status == "failed" for f in night.files)
    if night.run_exit:
        night.exit_code = night.run_exit
    elif failed_ingest or night.compact_exit:
        night.exit_code = 1
    elif night.health_exit:
        night.exit_code = HEALTH_FAILED
    _record(defn, night)


def _record(defn, night: Night) -> None:
    """The night's run row (when the ledger exists: a night with no ledger has nothing to note)."""
    from ..api.source import Source
    from ..ledger.consuming import RunResult, new_run_id, write_run_in_current_transaction

    if not Path(defn.source).is_file():
        return
    done = [f for f in night.files if f.status == "ingested"]
    run = RunResult(new_run_id("nightly"), "nightly", inputs=[str(f.path) for f in done],
                    outputs=sorted({f.topic for f in done}), rows_in=sum(f.lines for f in done),
                    rows_out=sum(f.appended for f in done), rows_duplicate=sum(f.duplicates for f in done),
                    rows_quarantined=sum(f.quarantined for f in done),
                    details={"pipeline": str(defn.path), "files_ingested": len(done),
                             "files_skipped": night.count("skipped"), "files_failed": night.count("failed"),
                             "run_exit": night.run_exit, "compact_exit": night.compact_exit,
                             "health_exit": night.health_exit, "log": str(night.log)})
    failed = night.exit_code not in (0,)
    why = None
    if failed:
        why = "; ".join(filter(None, [
            f"run exited {night.run_exit}" if night.run_exit else None,
            f"compact exited {night.compact_exit}" if night.compact_exit else None,
            f"{night.count('failed')} file(s) failed to ingest" if night.count("failed") else None,
            "a health check fails" if night.health_exit else None]))
    run.finish("failed" if failed else "succeeded", why)
    with Source(str(defn.source)) as source, source.ledger.atomic() as conn:
        write_run_in_current_transaction(conn, run)
