"""Stages over the ledger: plan, JDBC read, transform, conform, stage and commit once (``run_stage``);
per-row functions and arms; a backlog in chunks."""
