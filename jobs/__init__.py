"""spark-submit entry points, one per stage of the shipped example pipeline."""
