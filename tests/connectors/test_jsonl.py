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


def test_a_final_line_without_a_newline_is_stored_when_not_following(file_source, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"i": 0}\n{"i": 1}')
    stream = file_source.stream("events")
    src = JSONLSource(path, follow=False)
    stream.attach(src, background=False)
    assert [d["i"] for d in stream.iter_new()] == [0, 1] and src.appended == 2
    with open(path, "a") as fh:  # the writer ends that line later: nothing twice, line numbers right
        fh.write('\n{"i": 2}\n{oops\n')
    stream.attach(JSONLSource(path, follow=False), background=False)
    assert [d["i"] for d in stream.iter_new()] == [0, 1, 2]
    assert [q["origin"] for q in file_source.quarantined("events")] == [f"{path}:4"]


def test_a_nan_or_infinity_line_is_quarantined_with_its_origin_and_the_lines_around_it_are_stored(file_source,
                                                                                                 tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"sensor": "a", "value": 1}\n{"sensor": "b", "value": NaN}\n{"sensor": "c", "value": 3}\n'
                    '{"sensor": "d", "value": Infinity}\n')
    readings = file_source.topic("readings", Reading, dedup=None)
    src = JSONLSource(path, follow=False)
    readings.attach(src, background=False)
    assert [r.sensor for r in readings.iter_new()] == ["a", "c"] and (src.appended, src.quarantined) == (2, 2)
    bad = sorted(file_source.quarantined("readings"), key=lambda q: q["origin"])
    assert [q["origin"] for q in bad] == [f"{path}:2", f"{path}:4"]
    assert "NaN" in bad[0]["reason"] and "value" in bad[0]["reason"] and "NaN" in bad[0]["payload"]
    with open(path, "a") as fh:  # a restart goes past the bad lines
        fh.write('{"sensor": "e", "value": 5}\n')
    readings.attach(JSONLSource(path, follow=False), background=False)
    assert [r.sensor for r in readings.iter_new()] == ["a", "c", "e"]
    assert len(file_source.quarantined("readings")) == 2
    # a stream too; and a number too large for a float (1e999 reads as infinity) is refused
    # when validated: that line goes to the quarantine, the rest of its batch stays
    other = tmp_path / "other.jsonl"
    other.write_text('{"v": 1}\n{"v": NaN}\n{"v": 1e999}\n{"v": 4}\n')
    events = file_source.stream("events")
    events.attach(JSONLSource(other, follow=False), background=False)
    assert [d["v"] for d in events.iter_new()] == [1, 4]
    bad = sorted(file_source.quarantined("events"), key=lambda q: q["origin"])
    assert [q["origin"] for q in bad] == [f"{other}:2", f"{other}:3"]
    # the stream's JSON rule (the one notifications share) refuses it, naming the path
    assert "NaN is not a JSON value" in bad[0]["reason"] and "$.v is Infinity" in bad[1]["reason"]


def test_a_copytruncate_with_more_new_lines_than_before_within_one_poll_loses_no_line(file_source, tmp_path):
    path = tmp_path / "app.jsonl"
    path.write_text('{"i": 0}\n{"i": 1}\n')
    stream = file_source.stream("events")
    src = JSONLSource(path, poll=0.3)
    handle = stream.attach(src)
    wait_for(lambda: src.appended == 2)
    path.write_text('{"i": 2}\n{"i": 3}\n{"i": 4}\n')  # truncated and longer than before before the next look
    wait_for(lambda: src.appended == 5)
    handle.cancel()
    assert handle.error is None and [d["i"] for d in stream.iter_new()] == [0, 1, 2, 3, 4]
    # the same while no source runs: the restart sees the stored position no longer fits
    path.write_text('{"i": 5}\n{"i": 6}\n{"i": 7}\n{"i": 8}\n')
    stream.attach(JSONLSource(path, follow=False), background=False)
    assert [d["i"] for d in stream.iter_new()] == [0, 1, 2, 3, 4, 5, 6, 7, 8]
