"""Small helpers with no knowledge of the ledger: clock, TOML, Mermaid, GC pause, faults, DAG order."""
