"""The Python API: Source, Topic, Record, row-level pipes and FullPipeline.

Uses the ledger, never an engine: Spark is reached through ``engines``, which the
package root fills in.
"""
