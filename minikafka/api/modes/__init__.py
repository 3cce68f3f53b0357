"""The ways to consume a topic, each on TopicRows: row-level pipes, work queues (workers,
schedules), consumer groups, the streaming runner and its windows, attached sources, retention.

Imports core, never the face (source.py, topic.py, streams.py): tests/test_layers.py.
"""
