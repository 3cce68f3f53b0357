"""Data quality: great-expectations suites run on a stage's output before its commit.

``suite`` parses suite files without importing great-expectations until a pipeline
actually has suites; ``validate`` runs them on a Spark DataFrame.
"""

from .suite import POLICIES, QualityError, Suite, load_suite

__all__ = ["POLICIES", "QualityError", "Suite", "load_suite"]
