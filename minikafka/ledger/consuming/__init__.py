"""Consumption state: what consumers, queues, windows and runs have done, beside the topics.

Consumers' lag and activity (``consumers``), consumer-group reads (``groups``), work queues
(``queues``) and their schedules (``schedules``), streaming windows (``windows``), HTTP
delivery state (``deliveries``), notifications (``notifications``), the quarantine
(``quarantine``), the run log (``runlog``), how a person reads it (``runview``: quiet runs
folded, counts per topic) and its retention (``runlog_retention``), compaction of keyed tables that
spares what a running stage reads (``table_compaction``), topic-row
retention (``retention``), backfill progress (``loads``), the figures of health checks
(``vitals``), and the read models the CLI and the console show (``read_models``: a topic's
overview, consumer positions, a page of rows from a parsed filter, a queue's jobs). Most modules are the statements of one table family, used as a namespace by
the layers above (``from ..ledger.consuming import queues as store``).

Imports the topics room below it, no other.
"""

from . import (
    consumers,
    deliveries,
    groups,
    lineage_log,
    loads,
    metrics_read,
    notifications,
    quarantine,
    queues,
    read_models,
    retention,
    runlog,
    runlog_retention,
    runview,
    schedules,
    vitals,
    windows,
)
from .consumers import consumer_info, registered
from .groups import N_FETCH_META
from .metrics_read import LedgerFigures, read_figures
from .quarantine import Quarantined, list_quarantined, quarantine_in_current_transaction
from .queues import ORIGIN, Claim, revive_dead_in_current_transaction
from .read_models import RowFilter, job_state
from .runlog import (
    COLUMNS,
    INTERRUPTED,
    SHOWN_STATUSES,
    STATUSES,
    TERMINATED,
    RunResult,
    dead_running_runs,
    decoded,
    failed_run_ids,
    failure_status,
    insert_run_unless_present_in_current_transaction,
    interruption,
    mark_gone_in_current_transaction,
    mark_interrupted_in_current_transaction,
    new_run_id,
    quarantine_topics,
    quarantined_everything,
    read_runs,
    resume_note,
    run_exists,
    run_ids_beginning,
    settled,
    start_run_in_current_transaction,
    write_run_in_current_transaction,
)
from .runlog_retention import cutoff
from .table_compaction import compact_table_in_current_transaction
from .vitals import stages_in_runlog
from .windows import StoredWindow

__all__ = [
    "Claim",
    "COLUMNS",
    "compact_table_in_current_transaction",
    "consumer_info",
    "consumers",
    "cutoff",
    "dead_running_runs",
    "decoded",
    "deliveries",
    "failed_run_ids",
    "failure_status",
    "groups",
    "insert_run_unless_present_in_current_transaction",
    "INTERRUPTED",
    "interruption",
    "job_state",
    "LedgerFigures",
    "lineage_log",
    "list_quarantined",
    "loads",
    "mark_gone_in_current_transaction",
    "mark_interrupted_in_current_transaction",
    "metrics_read",
    "N_FETCH_META",
    "new_run_id",
    "notifications",
    "ORIGIN",
    "quarantine",
    "quarantine_in_current_transaction",
    "quarantine_topics",
    "Quarantined",
    "quarantined_everything",
    "queues",
    "read_figures",
    "read_models",
    "read_runs",
    "registered",
    "resume_note",
    "retention",
    "revive_dead_in_current_transaction",
    "RowFilter",
    "run_exists",
    "run_ids_beginning",
    "runlog",
    "runlog_retention",
    "RunResult",
    "runview",
    "schedules",
    "settled",
    "SHOWN_STATUSES",
    "stages_in_runlog",
    "start_run_in_current_transaction",
    "STATUSES",
    "StoredWindow",
    "TERMINATED",
    "vitals",
    "windows",
    "write_run_in_current_transaction",
]
