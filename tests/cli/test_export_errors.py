"""export writes atomically: a missing directory or a full disk is a clear error and leaves no partial file."""

from __future__ import annotations

import errno
import json
import os

import pyarrow.parquet as pq
import pytest

from minikafka import Source
from tests.cli.helpers import Item, invoke, seed


def export(db_path, path, fmt):
    return invoke("export", "items", "--format", fmt, path, "--source", db_path)


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def names(directory) -> list[str]:
    """The directory's files, without the ledger's WAL companions (a read-only open may leave them)."""
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(("-wal", "-shm")))


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_writes_the_whole_topic(db_path, tmp_path, fmt):
    seed(db_path, n=3)
    out_file = tmp_path / f"out.{fmt}"
    out = export(db_path, out_file, fmt)
    assert out.exit_code == 0, out.output
    if fmt == "jsonl":
        urls = [json.loads(line)["url"] for line in out_file.read_text().splitlines()]
    else:
        urls = pq.read_table(out_file).column("url").to_pylist()
    assert urls == ["u0", "u1", "u2"]
    assert os.stat(out_file).st_mode & 0o044  # readable like any file open() makes, not 0600
    assert names(tmp_path) == sorted(["ledger.sqlite", out_file.name])


def test_export_to_missing_directory_names_it(db_path, tmp_path):
    seed(db_path, n=2)
    target = tmp_path / "no" / "such" / "out.jsonl"
    out = export(db_path, target, "jsonl")
    assert out.exit_code == 1, out.output
    assert f"no directory {tmp_path / 'no' / 'such'}" in out.output and "Traceback" not in out.output
    assert not (tmp_path / "no").exists()
    with Source(db_path) as src:
        assert src.topic("items", Item, dedup=("url",)).count() == 2


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_on_full_disk_leaves_no_partial_file(db_path, tmp_path, monkeypatch, fmt):
    seed(db_path, n=3)
    target = tmp_path / f"out.{fmt}"
    monkeypatch.setattr(os, "fsync", no_space)
    out = export(db_path, target, fmt)
    assert out.exit_code == 1, out.output
    assert f"{target}: cannot write: No space left on device" in out.output and "Traceback" not in out.output
    assert names(tmp_path) == ["ledger.sqlite"]  # no output, no temporary file


def test_export_failing_mid_write_keeps_the_previous_export(db_path, tmp_path, monkeypatch):
    seed(db_path, n=3)
    target = tmp_path / "out.parquet"
    assert export(db_path, target, "parquet").exit_code == 0
    before = target.read_bytes()
    monkeypatch.setattr(pq.ParquetWriter, "write_table", no_space)
    out = export(db_path, target, "parquet")
    assert out.exit_code == 1 and "No space left on device" in out.output, out.output
    assert target.read_bytes() == before
    assert names(tmp_path) == ["ledger.sqlite", "out.parquet"]
