"""Part files: written whole or not at all; a missing part or a count other than its task
reported stops the reader (``ChunkJobs`` reads them in order: tests/spark/loading/test_jsonlparts.py)."""

from __future__ import annotations

import sqlite3

import pytest

from minikafka.errors import StagingError
from minikafka.ledger.topics import write_row_file
from minikafka.spark.loading.parts import check_count, local_part, write_part
from minikafka.spark.staging import filesystem


def _write(rows):
    return lambda path: write_row_file(path, 1, [(v,) for v in rows], list(range(1, len(rows) + 1)), [])


def _values(path):
    conn = sqlite3.connect(path)
    try:
        return [v for (v,) in conn.execute("SELECT c0 FROM mk_rows ORDER BY seq")]
    finally:
        conn.close()


def test_a_part_is_written_whole_under_its_task_number_and_read_back(tmp_path):
    uri = f"file://{tmp_path}/parts"
    (tmp_path / "parts").mkdir()
    write_part(uri, 0, _write(["a", "b", "c"]))
    write_part(uri, 1, _write([]))  # an empty task writes an empty part
    fs, directory = filesystem(uri)
    with local_part(fs, directory, 0) as path:
        assert _values(path) == ["a", "b", "c"]
    with local_part(fs, directory, 1) as path:
        assert _values(path) == []
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["part-00000.sqlite", "part-00001.sqlite"]


def test_a_failed_attempt_leaves_no_part_and_no_temporary_file_and_a_retry_writes_it(tmp_path):
    uri = f"file://{tmp_path}/parts"
    (tmp_path / "parts").mkdir()

    def broken(path):
        with open(path, "wb") as fh:
            fh.write(b"half a file")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_part(uri, 2, broken)
    assert list((tmp_path / "parts").iterdir()) == []  # never renamed into place, its temporary file gone
    write_part(uri, 2, _write(["x"]))  # the retry
    fs, directory = filesystem(uri)
    with local_part(fs, directory, 2) as path:
        assert _values(path) == ["x"]
    assert [p.name for p in (tmp_path / "parts").iterdir()] == ["part-00002.sqlite"]


def test_two_attempts_of_one_task_write_separate_temporary_files(tmp_path):
    uri = f"file://{tmp_path}/parts"
    (tmp_path / "parts").mkdir()
    seen = []

    def outer(path):  # a speculative attempt starts while the first is still writing
        seen.append(path)
        write_part(uri, 0, lambda inner: (seen.append(inner), _write(["second"])(inner)))
        _write(["first"])(path)

    write_part(uri, 0, outer)
    assert len(set(seen)) == 2
    fs, directory = filesystem(uri)
    with local_part(fs, directory, 0) as path:
        assert _values(path) == ["first"]  # whole: the last attempt to finish, never a mix


def test_a_part_on_a_non_local_filesystem_is_uploaded_and_downloaded(tmp_path, monkeypatch):
    import pyarrow.fs as pafs

    import minikafka.spark.staging as staging

    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())  # not a LocalFileSystem: the copy path
    fs.create_dir("parts")
    monkeypatch.setattr(staging, "filesystem", lambda uri: (fs, "parts"))
    write_part("remote://parts", 0, _write(["r1", "r2"]))
    assert (tmp_path / "parts" / "part-00000.sqlite").is_file()
    with local_part(fs, "parts", 0) as path:
        assert not path.startswith(str(tmp_path))  # a downloaded copy
        assert _values(path) == ["r1", "r2"]
    with pytest.raises(StagingError, match="part-00004.sqlite is missing"):
        with local_part(fs, "parts", 4):
            pass


def test_a_count_other_than_the_task_reported_is_a_staging_error():
    check_count("p", 3, 3)
    with pytest.raises(StagingError, match="reported 3 row"):
        check_count("p", 2, 3)


def test_a_part_its_task_never_wrote_where_the_driver_sees_is_a_staging_error(tmp_path):
    fs, directory = filesystem(f"file://{tmp_path}/parts")
    with pytest.raises(StagingError, match=r"part-00003.sqlite is missing although its Spark task finished"):
        with local_part(fs, directory, 3):
            pass
