"""The Spark engine: JDBC reads of topics, DataFrame stages, and the exactly-once commit.

Importing this package needs pyspark (``pip install 'minikafka-spark[spark]'``); without it the
import raises MissingDependencyError, one line naming that command.
"""

from ..util.optional import require

require("pyspark", "spark")  # before the modules below import it: one line naming the extra

from .read import read_topic  # noqa: E402
from .session import build_session  # noqa: E402
from .stage import Stage, StageFailed, run_stage  # noqa: E402

__all__ = ["Stage", "StageFailed", "build_session", "read_topic", "run_stage"]
