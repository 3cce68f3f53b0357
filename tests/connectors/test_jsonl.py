"""JSONLSource: follow a JSON-lines file into a stream, through rotation, quarantining bad lines."""

from __future__ import annotations

import os
import time

import pytest
from pydantic import BaseModel

from minikafka import Source
from minikafka.connectors import JSONLSource
from minikafka.errors import ConnectorError, StreamingConfigError


class Reading(BaseModel):
    sensor: str
    value: float


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def test_a_file_is_read_to_its_end_without_follow(file_source, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"i": 0}\n{"i": 1}\n\n{"i": 2}\n')
    stream = file_source.stream("events")
    src = JSONLSource(path, follow=False)
    stream.attach(src, background=False)
    assert list(stream.iter_new()) == [{"i": 0}, {"i": 1}, {"i": 2}] and src.appended == 3


def test_a_restart_resumes_after_the_last_stored_line(file_source, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"i": 0}\n{"i": 1}\n{"i": 2')  # the last line is still being written
    stream = file_source.stream("events")
    stream.attach(JSONLSource(path, follow=False), background=False)
    with open(path, "a") as fh:
        fh.write('}\n{"i": 3}\n')
    stream.attach(JSONLSource(path, follow=False), background=False)
    assert [d["i"] for d in stream.iter_new()] == [0, 1, 2, 3]


def test_a_malformed_line_is_quarantined_with_file_and_line_and_the_stream_goes_on(file_source, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"sensor": "a", "value": 1}\n{oops\n{"sensor": "b"}\n{"sensor": "c", "value": 3}\n')
    readings = file_source.topic("readings", Reading, dedup=None)
    readings.attach(JSONLSource(path, follow=False), background=False)
    assert [r.sensor for r in readings.iter_new()] == ["a", "c"]
    bad = sorted(file_source.quarantined("readings"), key=lambda q: q["origin"])
    assert [q["origin"] for q in bad] == [f"{path}:2", f"{path}:3"]
    assert "malformed JSON" in bad[0]["reason"] and "value" in bad[1]["reason"]


def test_following_picks_up_new_lines_and_survives_rotation(file_source, tmp_path):
    path = tmp_path / "app.jsonl"
    path.write_text('{"i": 0}\n')
    stream = file_source.stream("events")
    src = JSONLSource(path, poll=0.01)
    handle = stream.attach(src)
    wait_for(lambda: src.appended == 1)
    with open(path, "a") as fh:
        fh.write('{"i": 1}\n')
    wait_for(lambda: src.appended == 2)
    os.rename(path, tmp_path / "app.jsonl.1")
    with open(tmp_path / "app.jsonl.1", "a") as fh:  # a late write to the rotated file is not lost
        fh.write('{"i": 2}\n')
    path.write_text('{"i": 3}\n{"i": 4}\n')
    wait_for(lambda: src.appended == 5)
    path.write_text('{"i": 5}\n')  # truncated in place (copytruncate)
    wait_for(lambda: src.appended == 6)
    handle.cancel()
    assert not handle.running and handle.error is None
    assert [d["i"] for d in stream.iter_new()] == [0, 1, 2, 3, 4, 5]


def test_a_missing_file_without_follow_is_a_clear_error(file_source, tmp_path):
    with pytest.raises(ConnectorError, match="no such file"):
        file_source.stream("events").attach(JSONLSource(tmp_path / "nope.jsonl", follow=False), background=False)


def test_attaching_in_the_background_needs_a_file_ledger(source, tmp_path):
    with pytest.raises(StreamingConfigError, match="':memory:'"):
        source.stream("events").attach(JSONLSource(tmp_path / "x.jsonl"))


def test_attach_refuses_an_object_that_is_not_a_source(file_source):
    with pytest.raises(StreamingConfigError, match="stream\\(stream\\) and cancel"):
        file_source.stream("events").attach(object())


def test_followed_lines_feed_a_streaming_consumer(file_source, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(6)))
    stream = file_source.stream("events")
    stream.attach(JSONLSource(path, follow=False), background=False)
    sums = []
    Source.streaming(file_source, "events", lambda w: sums.append(sum(d["i"] for d in w.data)), consumer="sum",
                     size=3, until_idle=True)
    assert sums == [3, 12]
