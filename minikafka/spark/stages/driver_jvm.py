"""JVM options for a stage's short-lived spark-submit driver: the client JIT alone (C1) for a
small stage, and a class-data-sharing archive of Spark's classes that the first run writes and
every later run maps instead of loading and verifying each class again.

Measured on the example stage over 10,000 rows (2 cores, Java 17, pyspark 4.1): the JVM's
start to the job's Python, the session, the JDBC read and the first action together went from
about 8.3 s to 4.4 s; the run that writes the archive (about 165 MB, once per Java and Spark
install) takes about 8 s longer. The JVM checks the archive against its class path and
ignores one that does not match (silently). ``MINIKAFKA_SPARK_CDS=0`` turns the archive off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path

CDS_ENV = "MINIKAFKA_SPARK_CDS"
# up to this many input rows a stage's driver runs with C1 alone: its JIT costs less than
# C2's for a run of a few seconds (measured: about 1 s off a 10,000-row stage); a larger
# stage keeps C2, whose code is faster on a long run
SMALL_STAGE_ROWS = 200_000


def cache_dir() -> Path:
    """Where the archive lives: ``$XDG_CACHE_HOME/minikafka`` (default ``~/.cache/minikafka``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minikafka"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def archive_path(kind: str = "spark") -> Path | None:
    """The archive of ``kind`` ("spark": a stage's driver; "engine": an engine's, which holds
    the Connect server's classes too) for this Java and this Spark install (None: no Java found)."""
    import pyspark

    java = _java()
    if java is None:
        return None
    real = Path(java).resolve()
    key = f"{real}:{real.stat().st_mtime_ns}:{Path(pyspark.__file__).parent}:{pyspark.__version__}"
    return cache_dir() / f"{kind}-{pyspark.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.jsa"


def driver_options(base: str, rows: int | None, kind: str = "spark") -> tuple[str, Path | None]:
    """(the driver's Java options: ``base`` and ours, the archive file this run writes or None).

    ``rows``: the stage's input rows when known (C1 alone up to ``SMALL_STAGE_ROWS``);
    ``kind``: which archive (``archive_path``).
    """
    options = [base] if base else []
    if rows is not None and rows <= SMALL_STAGE_ROWS:
        options.append("-XX:TieredStopAtLevel=1")
    writes = None
    if os.environ.get(CDS_ENV, "1") != "0":
        archive = archive_path(kind)
        if archive is not None and " " not in str(archive):
            if archive.is_file():
                options.append(f"-XX:SharedArchiveFile={archive}")
            else:
                archive.parent.mkdir(parents=True, exist_ok=True)
                writes = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:8]}.tmp")
                options.append(f"-XX:ArchiveClassesAtExit={writes}")
            options.append("-Xlog:cds=off,cds+dynamic=off")  # an archive that does not match is ignored quietly
    return " ".join(options), writes


def keep_archive(written: Path | None, ok: bool) -> None:
    """After the run: the archive it wrote takes its place (the first one wins) when the run
    ended well; otherwise it is removed (a killed JVM may have left half of it)."""
    if written is None:
        return
    final = written.with_name(written.name.rsplit(".", 2)[0])
    try:
        if ok and written.is_file() and written.stat().st_size > 0 and not final.exists():
            os.replace(written, final)
    finally:
        written.unlink(missing_ok=True)
