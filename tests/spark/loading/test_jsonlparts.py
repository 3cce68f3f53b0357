"""The JSONL chunk tasks: what they do to the worker process they run in."""

from __future__ import annotations


def test_a_validating_worker_yields_the_cpu_to_the_driver_on_a_local_master():
    import os
    import subprocess
    import sys

    code = ("import os; from minikafka.spark.loading import jsonlparts as j; j._lower_priority(); j._lower_priority(); "
            "print(os.nice(0))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert int(out.stdout) == max(os.nice(0), 10)


# -- ChunkJobs: one Spark job per chunk, rows read back in chunk order ----------------------------

import json  # noqa: E402

import pytest  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class Row(BaseModel):
    url: str
    n: int


def _jobs(spark, tmp_path, already=0, on_wait=None, chunk_bytes=100):
    from minikafka import Source
    from minikafka.spark.loading.dumpsplit import ChunkWriter
    from minikafka.spark.loading.jsonlparts import ChunkJobs

    with Source(str(tmp_path / "l.sqlite")) as src:
        layout = src.topic("rows", Row, dedup=("url",)).layout
    text = "".join(json.dumps({"url": f"u{i}", "n": i}) + "\n" if i != 7 else "not json\n" for i in range(1, 41))
    jobs = ChunkJobs(spark, Row, layout, "dump.jsonl", f"file://{tmp_path}/parts", already=already, on_wait=on_wait)
    writer = ChunkWriter(f"file://{tmp_path}/chunks", chunk_bytes=chunk_bytes, on_chunk=jobs.submit)
    writer.feed(text.encode())
    chunks = writer.close()
    return jobs, chunks


def _lines(jobs):
    """(line, url or None, error or None) of every part, in the order ChunkJobs gives them."""
    import sqlite3
    from array import array

    out = []
    for path, reported in jobs:
        conn = sqlite3.connect(path)
        try:
            lines = array("q", conn.execute("SELECT lines FROM mk_about").fetchone()[0])
            urls = [url for (url,) in conn.execute("SELECT c0 FROM mk_rows ORDER BY seq")]
            part = sorted([(line, url, None) for line, url in zip(lines, urls, strict=True)]
                          + [(line, None, error) for line, error in conn.execute("SELECT line, error FROM mk_refused")])
        finally:
            conn.close()
        assert len(part) == reported
        out += part
    return out


@pytest.mark.spark
def test_chunk_jobs_give_every_line_in_order_and_leave_out_lines_already_committed(spark, tmp_path):
    waits = []
    jobs, chunks = _jobs(spark, tmp_path, already=12, on_wait=lambda: waits.append(1))
    try:
        assert len(chunks) > 5
        rows = _lines(jobs)
    finally:
        jobs.close()
    assert [r[0] for r in rows] == list(range(13, 41)) and jobs.rows == 28
    assert all(url == f"u{line}" and error is None for line, url, error in rows)
    assert len(waits) <= len(chunks)  # at most once per chunk it waited for


@pytest.mark.spark
def test_chunk_jobs_keep_a_refused_line_in_its_place_with_ingest_reason(spark, tmp_path):
    jobs, _chunks = _jobs(spark, tmp_path)
    try:
        rows = _lines(jobs)
    finally:
        jobs.close()
    assert [r[0] for r in rows] == list(range(1, 41))
    assert [r for r in rows if r[2]] == [(7, None, rows[6][2])] and rows[6][2].startswith("malformed JSON")


@pytest.mark.spark
def test_chunk_jobs_keep_each_downloaded_part_while_a_transaction_may_still_hold_it_attached(spark, tmp_path):
    import os

    import pyarrow.fs as pafs

    from minikafka.ledger.topics import MAX_ATTACHED

    jobs, chunks = _jobs(spark, tmp_path, chunk_bytes=40)
    try:
        assert len(chunks) > MAX_ATTACHED + 1
        for f in jobs._futures:
            f.result()
        # the staging location seen through a filesystem that is not local: each part is downloaded
        jobs.fs, jobs.dir = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem()), "parts"
        paths = []
        last_running = []
        for path, _reported in jobs:
            assert not path.startswith(str(tmp_path))  # a downloaded copy
            paths.append(path)
            kept = [os.path.exists(p) for p in paths]
            assert kept == [len(paths) - i <= MAX_ATTACHED for i in range(len(paths))]  # the last MAX_ATTACHED
            last_running.append(jobs.last_running())
    finally:
        jobs.close()
    assert not any(os.path.exists(p) for p in paths)  # all removed once the iteration ends
    assert not any(last_running)  # every job had ended: nothing is still being validated
