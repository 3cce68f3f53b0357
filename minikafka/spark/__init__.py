"""The Spark engine: JDBC reads of topics, DataFrame stages, and the exactly-once commit.

Importing this package needs pyspark (``pip install 'minikafka[spark]'``).
"""

from .read import read_topic
from .session import build_session
from .stage import Stage, StageFailed, run_stage

__all__ = ["Stage", "StageFailed", "build_session", "read_topic", "run_stage"]
