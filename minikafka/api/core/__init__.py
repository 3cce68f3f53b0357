"""What every mode stands on: the rows of one topic (TopicRows), records, transactions,
notifications, the engine registry, requeue, and the handles the modes type against.

Imports only errors, util and ledger (tests/test_layers.py).
"""
