"""One scrape of a ledger: open it read-only, read every figure in one short read transaction,
close it, format the exposition; and the textfile node_exporter's collector reads.

Nothing here remembers anything between scrapes: a run that died since the last scrape
shows in the next one as the ledger records it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import OutputFileError
from ..ledger.consuming import LedgerFigures, read_figures, stages_in_runlog
from ..ledger.files import snapshot_figures
from ..ledger.transactions import Ledger, read_snapshot
from ..util.atomicfile import atomic_write
from .prometheus import render

TEXTFILE_NAME = "minikafka.prom"  # node_exporter's textfile collector reads *.prom


@dataclass(frozen=True)
class PipelineScope:
    """A pipeline on the ledger: its name (the ``pipeline`` label), its stages (reported even
    before their first run) and its ``[health] backups`` directory (its snapshots of this ledger
    are counted)."""

    name: str
    stages: tuple[str, ...]
    backups: Path | None = None


def read(ledger_path: str | Path, pipelines: Sequence[PipelineScope] = (), *,
         busy_timeout: float = 5.0) -> tuple[LedgerFigures, dict[str, str]]:
    """(figures, {stage: pipeline name}) of the ledger: every stage of ``pipelines`` and of the run log.

    Raises:
        LedgerNotFoundError: no ledger at ``ledger_path``.
        LedgerError: not a ledger, or busy past ``busy_timeout``.
    """
    pipeline_of: dict[str, str] = {}
    for scope in pipelines:
        for stage in scope.stages:
            pipeline_of.setdefault(stage, scope.name)
    led = Ledger(str(ledger_path), read_only=True, busy_timeout=busy_timeout)
    try:
        with read_snapshot(led.conn) as conn:
            stages = list(pipeline_of) + [s for s in stages_in_runlog(conn) if s not in pipeline_of]
            figures = read_figures(conn, ledger_path, stages, now_ms=int(time.time() * 1000))
    finally:
        led.close()
    backups = next((s.backups for s in pipelines if s.backups is not None), None)
    if backups is not None:
        newest, count = snapshot_figures(ledger_path, backups)
        figures = dataclasses.replace(figures, newest_snapshot=newest, snapshots=count)
    return figures, pipeline_of


def exposition(ledger_path: str | Path, pipelines: Sequence[PipelineScope] = ()) -> str:
    """The Prometheus text exposition of the ledger (see ``observe.prometheus``)."""
    figures, pipeline_of = read(ledger_path, pipelines)
    return render(figures, pipeline_of)


def write_textfile(text: str, directory: str | Path, name: str = TEXTFILE_NAME) -> Path:
    """Write ``text`` to ``directory/name`` atomically (a temporary file renamed over it: the
    collector never reads half a file). Returns the path written.

    Raises:
        OutputFileError: ``directory`` is not a directory, or the file cannot be written.
    """
    folder = Path(directory).expanduser()
    if not folder.is_dir():
        raise OutputFileError(f"{directory}: no such directory (the textfile collector's directory; create it first)")
    target = folder / name
    with atomic_write(target) as fh:
        fh.write(text.encode("utf-8"))
    return target
