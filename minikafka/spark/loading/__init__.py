"""Backfill: dumps (JSONL, CSV, Parquet; gzip) read, cut and checked on the executors, their rows
committed in slices with each file's progress, so a killed backfill re-run skips what is stored."""
