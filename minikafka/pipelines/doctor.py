"""``doctor``: the set-up checked, each finding with what to change.

``doctor_checks(ledger, pipeline)`` returns one ``CheckResult`` per check:

- ``ledger file system``: a network file system (NFS, SMB, sshfs...) breaks SQLite's
  locks: the ledger belongs on a local disk;
- ``ledger``: the file is a minikafka ledger (not empty, not a text file, not another
  SQLite database), its format and identity; when it is not, the checks that read it are
  left out;
- ``ledger journal``: WAL mode (minikafka sets it, with ``synchronous=FULL`` on every
  connection);
- ``ledger wal``: the -wal file's size, and whether a reader pins it (a long read
  transaction keeps every later commit in the log);
- ``ledger integrity``: ``PRAGMA quick_check`` (every page and b-tree, read once);
- ``disk space``: free space beside the ledger against one copy of it (a snapshot) and
  twice the next backfill's files;
- ``java``, ``jdbc jar``, ``spark``: what Spark stages need (a ``JAVA_HOME`` without
  ``bin/java`` fails: Spark uses it before PATH);
- ``stage NAME job``: each stage's job module imports and defines transform or row_fn;
- ``stage NAME inputs``, ``stage NAME aggregate``: designs that give wrong answers over nights
  (``design.design_warnings``: a join of several plain inputs, an aggregate into a
  deduplicated topic), each naming the tool that fixes it;
- ``staging``: for a non-local master, the staging location exists and is writable;
- ``backups``: the newest snapshot in ``[health] backups`` against ``backup_freshness``
  (or the longest stage freshness).

A check that breaks (a damaged file, a permission) is a failing check saying why; every
other check still runs.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from datetime import datetime
from importlib import metadata
from pathlib import Path

from ..errors import MinikafkaError
from ..ledger.files import snapshots
from ..ledger.transactions import filecheck
from ..util import clock
from ..util.checks import FAIL, OK, WARN, CheckResult, human_age
from ..util.duration import format_duration
from .definition import PipelineDefinition
from .design import design_warnings

WAL_WARN_BYTES = 256 * 1024 * 1024
GB = 1e9


def _filesystem(ledger: Path) -> CheckResult:
    kind = filecheck.filesystem_type(ledger.parent)
    if filecheck.is_network_filesystem(kind):
        return CheckResult("ledger file system", FAIL,
                           f"{ledger.parent} is on {kind}, a network file system: SQLite's locks are not reliable "
                           "there and a ledger can be corrupted, so minikafka refuses to open it for writing; move "
                           "the ledger to a local disk (staging, not the ledger, is what other hosts share)",
                           {"type": kind})
    return CheckResult("ledger file system", OK, f"local ({kind or 'unknown type'})", {"type": kind})


def _journal(ledger: Path) -> CheckResult:
    try:
        mode = filecheck.journal_mode(ledger)
    except Exception as exc:  # noqa: BLE001 (a damaged or locked file is a finding, not a crash)
        return CheckResult("ledger journal", FAIL, f"cannot read the ledger: {exc}", {})
    if mode != "wal":
        return CheckResult("ledger journal", WARN,
                           f"journal_mode is {mode}; the next write through minikafka switches it to WAL "
                           "(readers then never block writers, and Litestream needs it)", {"journal_mode": mode})
    return CheckResult("ledger journal", OK, "WAL, synchronous=FULL on every minikafka connection "
                       "(a commit that returned survives a power cut)", {"journal_mode": mode})


def _wal(ledger: Path) -> CheckResult:
    state = filecheck.wal_state(ledger)
    numbers = {"wal_bytes": state.wal_bytes, "frames": state.frames, "copied": state.copied}
    mb = state.wal_bytes / 1e6
    if state.frames < 0:
        return CheckResult("ledger wal", WARN, f"-wal {mb:.1f} MB; could not checkpoint (read-only, or busy)", numbers)
    if state.pinned:
        return CheckResult("ledger wal", WARN,
                           f"-wal {mb:.1f} MB; {state.pinned} of {state.frames} frames cannot be copied into the "
                           "database: a reader holds an old snapshot (a long read transaction, a stuck process, or "
                           "Litestream between syncs); the log grows until it ends", numbers)
    if state.wal_bytes > WAL_WARN_BYTES:
        return CheckResult("ledger wal", WARN, f"-wal {mb:.1f} MB, every frame copied; it shrinks at the next "
                           "write that finds no reader", numbers)
    return CheckResult("ledger wal", OK, f"-wal {mb:.1f} MB, no reader pins it", numbers)


def _ledger(ledger: Path) -> CheckResult:
    problem = filecheck.ledger_file_problem(ledger)
    if problem:
        return CheckResult("ledger", FAIL, f"{problem}: check the path ('source =' or --source), or restore it "
                           "from a snapshot ('minikafka restore BACKUP_DIR')", {"path": str(ledger)})
    found, ledger_id = filecheck.ledger_facts(ledger)
    return CheckResult("ledger", OK, f"format {found}, id {ledger_id or 'none yet (given at the next write)'}",
                       {"format": found, "ledger_id": ledger_id})


def _integrity(ledger: Path) -> CheckResult:
    problems = filecheck.quick_check_problems(ledger)
    if problems:
        return CheckResult("ledger integrity", FAIL, f"PRAGMA quick_check: {'; '.join(problems[:3])}; "
                           f"{filecheck.damage_advice(ledger)}", {"problems": problems})
    return CheckResult("ledger integrity", OK, "PRAGMA quick_check ok", {"problems": []})


def _guarded(name: str, check: Callable[[], CheckResult | list[CheckResult]]) -> list[CheckResult]:
    """``check()``'s result, or one failing check named ``name`` saying why it could not run."""
    try:
        found = check()
    except Exception as exc:  # noqa: BLE001 (a damaged file or a permission is a finding, not a crash)
        return [CheckResult(name, FAIL, f"could not check: {type(exc).__name__}: {exc}", {})]
    return found if isinstance(found, list) else [found]


def _jobs(pipeline: PipelineDefinition) -> list[CheckResult]:
    out = []
    for stage in pipeline.stages:
        name = f"stage {stage.name} job"
        try:
            module = stage.job_module()
        except Exception as exc:  # noqa: BLE001 (ImportError, or whatever the module raises on import)
            out.append(CheckResult(name, FAIL, f"cannot import job module {stage.job!r}: {type(exc).__name__}: "
                                   f"{exc}; check 'job =' in {pipeline.path} (a module on the path of the "
                                   "directory minikafka runs in)", {"job": stage.job}))
            continue
        kinds = [k for k in ("transform", "row_fn") if callable(getattr(module, k, None))]
        if len(kinds) != 1:
            out.append(CheckResult(name, FAIL, f"job module {stage.job!r} must define exactly one of transform(df) "
                                   f"or row_fn(model), it defines {' and '.join(kinds) or 'neither'}",
                                   {"job": stage.job}))
        else:
            out.append(CheckResult(name, OK, f"{stage.job} ({kinds[0]})", {"job": stage.job}))
    return out


def _disk(ledger: Path, backfill: Iterable[str | Path]) -> CheckResult:
    usage = shutil.disk_usage(ledger.parent)
    size = ledger.stat().st_size + sum(Path(f"{ledger}{s}").stat().st_size for s in ("-wal",)
                                       if Path(f"{ledger}{s}").exists())
    dumps = 0
    for item in backfill:
        p = Path(item)
        dumps += sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else \
            (p.stat().st_size if p.exists() else 0)
    need = size + 2 * dumps
    numbers = {"free_bytes": usage.free, "ledger_bytes": size, "backfill_bytes": dumps, "need_bytes": need}
    text = f"{usage.free / GB:.1f} GB free; ledger {size / GB:.2f} GB" + (
        f", next backfill {dumps / GB:.2f} GB of files" if dumps else "")
    if usage.free < need:
        return CheckResult("disk space", FAIL, f"{text}: needs {need / GB:.2f} GB (one snapshot of the ledger "
                           "plus twice the backfill); free space or move the ledger", numbers)
    if usage.free < 2 * need:
        return CheckResult("disk space", WARN, f"{text}: less than twice what a snapshot and the backfill need",
                           numbers)
    return CheckResult("disk space", OK, text, numbers)


def _spark_parts(pipeline: PipelineDefinition | None) -> list[CheckResult]:
    from ..spark.session import DEFAULT_JDBC_JAR, JDBC_JAR_CONF, check_java, jdbc_jar

    out = []
    try:
        check_java()
        out.append(CheckResult("java", OK, "a Java runtime is on PATH (or JAVA_HOME)", {}))
    except MinikafkaError as exc:
        out.append(CheckResult("java", FAIL, str(exc), {}))
    configured = pipeline.spark.get(JDBC_JAR_CONF) if pipeline else None
    try:
        jar = jdbc_jar(configured)
        out.append(CheckResult("jdbc jar", OK, jar, {"path": jar}))
    except MinikafkaError as exc:
        out.append(CheckResult("jdbc jar", FAIL, str(exc), {"path": configured or DEFAULT_JDBC_JAR}))
    try:
        version = metadata.version("pyspark")
        out.append(CheckResult("spark", OK, f"pyspark {version}", {"version": version}))
    except metadata.PackageNotFoundError:
        out.append(CheckResult("spark", WARN, "pyspark is not installed: Spark stages need it "
                               "(pip install -c constraints.txt '.[spark]'); the Python API works without", {}))
    return out


def _staging(pipeline: PipelineDefinition) -> CheckResult:
    from ..spark import staging as stg

    master = pipeline.master
    if stg.is_local_master(master):
        return CheckResult("staging", OK, f"master {master} is local: executors read the ledger's directory",
                           {"master": master})
    try:
        area = stg.choose_staging(master, pipeline.staging, str(pipeline.source))
        stg.check_area(area)
    except MinikafkaError as exc:
        return CheckResult("staging", FAIL, str(exc), {"master": master, "staging": pipeline.staging})
    return CheckResult("staging", OK, f"{area.uri} exists and this host can write it (every node must see it too)",
                       {"master": master, "staging": area.uri})


def _backups(ledger: Path, pipeline: PipelineDefinition, now: datetime) -> CheckResult:
    settings = pipeline.health
    limit = settings.backup_freshness or max((s.freshness for s in pipeline.stages if s.freshness), default=None)
    if settings.backups is None:
        return CheckResult("backups", WARN, "no [health] backups directory in the pipeline file: take snapshots "
                           "with 'minikafka backup DIR' (or 'minikafka run --backup-before DIR') and name DIR there",
                           {"limit_s": limit})
    found = snapshots.list_snapshots(settings.backups, ledger)
    if not found:
        return CheckResult("backups", FAIL, f"no snapshot in {settings.backups}: run 'minikafka backup "
                           f"{settings.backups}'", {"age_s": None, "limit_s": limit})
    age = max(0.0, (now - found[0].taken_at).total_seconds())
    numbers = {"age_s": age, "limit_s": limit, "newest": str(found[0].path)}
    if limit is not None and age > limit:
        return CheckResult("backups", FAIL, f"newest snapshot is {human_age(age)} old, older than the pipeline's "
                           f"freshness ({format_duration(limit)}): schedule 'minikafka backup' (or run --backup-before)",
                           numbers)
    return CheckResult("backups", OK, f"newest snapshot {human_age(age)} old"
                       + (f" (limit {format_duration(limit)})" if limit else ""), numbers)


def doctor_checks(ledger: str | Path, pipeline: PipelineDefinition | None = None, *,
                  backfill: Iterable[str | Path] = (), now: datetime | None = None) -> list[CheckResult]:
    """Every set-up check of ``ledger`` (and of the pipeline, when given). Reads only; a
    PASSIVE checkpoint is the one write it may cause, as any writer's.

    Args:
        backfill: the files (or directories) of the next backfill, for the disk check.
    """
    path = Path(ledger).expanduser().resolve()
    now = now or clock.now()
    checks: list[CheckResult] = []
    if path.is_file():
        checks += _guarded("ledger file system", lambda: _filesystem(path))
        checks += _guarded("ledger", lambda: _ledger(path))
        if checks[-1].state != FAIL:  # a file that is not a ledger has no journal, log or pages to check
            checks += _guarded("ledger journal", lambda: _journal(path))
            checks += _guarded("ledger wal", lambda: _wal(path))
            checks += _guarded("ledger integrity", lambda: _integrity(path))
        checks += _guarded("disk space", lambda: _disk(path, backfill))
    else:
        checks.append(CheckResult("ledger", FAIL, f"no ledger at {path}: check the path ('source =' or --source); "
                                  "the first ingest or run with --create makes it", {"path": str(path)}))
    checks += _guarded("spark", lambda: _spark_parts(pipeline))
    if pipeline is not None:
        checks += _guarded("stage jobs", lambda: _jobs(pipeline))
        checks += _guarded("stage designs", lambda: design_warnings(pipeline))
        checks += _guarded("staging", lambda: _staging(pipeline))
        checks += _guarded("backups", lambda: _backups(path, pipeline, now))
    return checks
