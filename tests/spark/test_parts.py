"""Part files: written whole or not at all; a missing part or a count other than its task
reported stops the reader (``ChunkJobs`` reads them in order: tests/spark/test_jsonlparts.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from minikafka.errors import StagingError
from minikafka.spark.parts import read_part, write_part
from minikafka.spark.staging import filesystem

SCHEMA = pa.schema([("n", pa.int64())])


def batch(*values):
    return pa.RecordBatch.from_pydict({"n": list(values)}, schema=SCHEMA)


def test_a_part_is_written_whole_and_read_back_with_its_count(tmp_path):
    uri = f"file://{tmp_path}/parts"
    (tmp_path / "parts").mkdir()
    assert write_part(uri, 0, SCHEMA, [batch(1), batch(2, 3)]) == 3
    assert write_part(uri, 1, SCHEMA, []) == 0  # an empty task writes an empty part
    fs, directory = filesystem(uri)
    assert read_part(fs, directory, 0, 3).column("n").to_pylist() == [1, 2, 3]
    assert read_part(fs, directory, 1, 0).num_rows == 0
    assert sorted(p.name for p in (tmp_path / "parts").iterdir()) == ["part-00000.arrow", "part-00001.arrow"]


def test_a_count_other_than_the_task_reported_is_a_staging_error(tmp_path):
    uri = f"file://{tmp_path}/parts"
    (tmp_path / "parts").mkdir()
    write_part(uri, 0, SCHEMA, [batch(1, 2)])
    fs, directory = filesystem(uri)
    with pytest.raises(StagingError, match="reported 3 row"):
        read_part(fs, directory, 0, 3)


def test_read_part_calls_a_part_its_task_never_wrote_where_the_driver_sees_a_staging_error(tmp_path):
    fs, directory = filesystem(f"file://{tmp_path}/parts")
    with pytest.raises(StagingError, match=r"part-00003.arrow is missing although its Spark task finished"):
        read_part(fs, directory, 3, 10)
