"""A reserved topic name, or an SQLite error no command caught, is one Error: line, not a traceback."""

from __future__ import annotations

import sqlite3

from minikafka import Source
from tests.cli.helpers import invoke, seed


def test_ingest_into_a_sqlite_prefixed_topic_is_one_error_line(db_path, tmp_path):
    seed(db_path)
    dump = tmp_path / "f.jsonl"
    dump.write_text('{"title": "t", "url": "u", "score": 1.0}\n')
    out = invoke("ingest", "--source", db_path, "--model", "tests.cli.helpers:Item", "--dedup", "url",
                 "sqlite_items", dump)
    assert out.exit_code == 1
    assert "invalid topic name 'sqlite_items'" in out.output and "Traceback" not in out.output
    with Source(db_path, read_only=True) as src:
        assert src.topics() == ["items"]


def test_an_sqlite_error_escaping_a_command_is_one_error_line(db_path, tmp_path, monkeypatch):
    import minikafka.connectors.ingest as ingest_mod

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(ingest_mod, "ingest_jsonl", broken)
    seed(db_path)
    dump = tmp_path / "f.jsonl"
    dump.write_text('{"title": "t", "url": "u9", "score": 1.0}\n')
    out = invoke("ingest", "--source", db_path, "--model", "tests.cli.helpers:Item", "items", dump)
    assert out.exit_code == 1
    assert out.output.strip().splitlines()[-1] == "Error: SQLite: disk I/O error"
