"""The Spark engine, in two wings beside what both share.

- ``stages/``: a stage over the ledger: JDBC reads of topics, the plan, the DataFrame
  transform, conform, per-row functions, the staged output followed into the commit.
- ``loading/``: backfill: dumps read, cut and checked on the executors, committed in slices.
- here, shared by both: ``session`` (the SparkSession), ``staging`` (where data crosses between
  driver and executors, run locks), ``types`` (Spark types of ledger columns), ``engine`` (the
  warm engine's server process, and what differs between a classic and a Connect session).

The rule: a wing imports the shared modules and the layers below, never the other wing; the
shared modules import neither wing (tests/test_layers.py).

Importing this package needs pyspark (``pip install 'minikafka-spark[spark]'``); without it the
import raises MissingDependencyError, one line naming that command.
"""

from ..util.optional import require

require("pyspark", "spark")  # before the modules below import it: one line naming the extra

from .session import build_session  # noqa: E402
from .stages.context import StageContext  # noqa: E402
from .stages.read import read_topic  # noqa: E402
from .stages.stage import Stage, StageFailed, run_stage  # noqa: E402

__all__ = ["Stage", "StageContext", "StageFailed", "build_session", "read_topic", "run_stage"]
