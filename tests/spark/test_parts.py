"""Part streams: parts read in order as they appear, whatever order the tasks finish in;
a missing part, a wrong count or the job's own error stops the reader."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from minikafka.errors import StagingError
from minikafka.spark.parts import PartStream, write_part

SCHEMA = pa.schema([("n", pa.int64())])


class FakeContext:
    def __init__(self):
        self.cancelled = []

    def setJobGroup(self, group, description, interruptOnCancel=False):  # noqa: N802 - Spark's name
        pass

    def cancelJobGroup(self, group):  # noqa: N802 - Spark's name
        self.cancelled.append(group)


class FakeSpark:
    def __init__(self):
        self.sparkContext = FakeContext()  # noqa: N815 - Spark's name


def batch(*values):
    return pa.RecordBatch.from_pydict({"n": list(values)}, schema=SCHEMA)


def test_parts_are_read_in_order_although_the_last_is_written_first(tmp_path):
    uri = f"file://{tmp_path}/parts"
    first_read = threading.Event()

    def job():
        counts = {2: write_part(uri, 2, SCHEMA, [batch(5, 6)])}
        counts[0] = write_part(uri, 0, SCHEMA, [batch(1), batch(2)])
        first_read.wait(10)  # part 0 was read while the job still runs
        counts[1] = write_part(uri, 1, SCHEMA, [])  # an empty task writes an empty part
        return counts

    stream = PartStream(FakeSpark(), job, uri, 3, "test")
    seen = []
    for b in stream:
        seen += b.column("n").to_pylist()
        first_read.set()
    assert seen == [1, 2, 5, 6] and stream.rows == 4


def test_a_part_missing_after_the_job_is_a_staging_error(tmp_path):
    uri = f"file://{tmp_path}/parts"
    stream = PartStream(FakeSpark(), lambda: {0: write_part(uri, 0, SCHEMA, [batch(1)])}, uri, 2, "test")
    with pytest.raises(StagingError, match="part-00001.arrow is missing"):
        list(stream)


def test_a_count_other_than_the_task_reported_is_a_staging_error(tmp_path):
    uri = f"file://{tmp_path}/parts"

    def job():
        write_part(uri, 0, SCHEMA, [batch(1, 2)])
        return {0: 3}

    stream = PartStream(FakeSpark(), job, uri, 1, "test")
    stream._thread.join()
    with pytest.raises(StagingError, match="reported 3 row"):
        list(stream)


def test_the_jobs_own_error_reaches_the_reader_and_close_cancels_a_running_job(tmp_path):
    uri = f"file://{tmp_path}/parts"

    def failing():
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        list(PartStream(FakeSpark(), failing, uri, 1, "test"))
    release = threading.Event()
    spark = FakeSpark()
    stream = PartStream(spark, lambda: release.wait(10) and {}, uri, 1, "test")
    threading.Timer(0.05, release.set).start()
    stream.close()
    assert spark.sparkContext.cancelled == [stream.group]


def test_the_reader_uses_its_wait_for_the_given_work_once_per_part_it_waits_for(tmp_path):
    uri = f"file://{tmp_path}/parts"
    go, calls = threading.Event(), []

    def job():
        go.wait(10)
        return {0: write_part(uri, 0, SCHEMA, [batch(1)])}

    def on_wait():
        calls.append(1)
        go.set()  # the part is written only once the reader found it missing

    stream = PartStream(FakeSpark(), job, uri, 1, "test", on_wait=on_wait)
    assert [b.num_rows for b in stream] == [1] and calls == [1]


def test_read_part_calls_a_part_its_task_never_wrote_where_the_driver_sees_a_staging_error(tmp_path):
    from minikafka.spark.parts import read_part
    from minikafka.spark.staging import filesystem

    fs, directory = filesystem(f"file://{tmp_path}/parts")
    with pytest.raises(StagingError, match=r"part-00003.arrow is missing although its Spark task finished"):
        read_part(fs, directory, 3, 10)
