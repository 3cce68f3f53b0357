"""Streams and windowed streaming consumers (minibatch's model on the ledger)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest
from pydantic import BaseModel

from minikafka.api.modes.windows import WindowEmitter
from minikafka.errors import InvalidRecordError, SchemaMismatchError, StreamingConfigError, WindowFailedError
from minikafka.util.clock import ManualClock, use_clock

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=timezone.utc)


class Reading(BaseModel):
    sensor: str
    value: float


class Total(BaseModel):
    n: int
    total: float


def fill(stream, n, start=0):
    for i in range(start, start + n):
        stream.append({"i": i})


def collect(source, name="events", **kwargs):
    seen = []

    def proc(window):
        seen.append((window.id, [r.id for r in window.records], window.data))

    kwargs.setdefault("until_idle", True)
    consumer = source.streaming(name, proc, **kwargs)
    return seen, consumer


def test_a_stream_stores_json_objects_and_reads_them_back(source):
    stream = source.stream("events")
    stream.append({"foo": "bar", "n": [1, 2]})
    stream.extend([{"a": 1}, {"b": {"c": None}}])
    assert list(stream.iter_new()) == [{"foo": "bar", "n": [1, 2]}, {"a": 1}, {"b": {"c": None}}]
    assert source.stream("events") is stream
    assert stream.count("new") == 3


def test_a_stream_refuses_what_is_not_a_json_object(source):
    stream = source.stream("events")
    with pytest.raises(InvalidRecordError, match="JSON objects"):
        stream.append([1, 2])
    assert stream.count() == 0


def test_a_typed_topic_cannot_be_reopened_as_a_stream(source):
    source.topic("readings", Reading, dedup=None)
    with pytest.raises(SchemaMismatchError):
        source.stream("readings")


def test_ten_rows_with_size_2_give_exactly_five_windows_of_two_in_offset_order(source):
    fill(source.stream("events"), 10)
    seen, consumer = collect(source, size=2)
    assert [w[0] for w in seen] == [1, 2, 3, 4, 5]
    assert [w[1] for w in seen] == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]
    assert [x["i"] for w in seen for x in w[2]] == list(range(10))
    assert consumer.windows_committed == 5 and consumer.rows == 10


def test_nine_rows_give_four_windows_and_leave_one_pending(source):
    stream = source.stream("events")
    fill(stream, 9)
    seen, _ = collect(source, size=2, consumer="pairs")
    assert [len(w[1]) for w in seen] == [2, 2, 2, 2]
    assert stream.count("new", consumer="pairs") == 1
    fill(stream, 1, start=9)
    more, _ = collect(source, size=2, consumer="pairs")
    assert more == [(5, [9, 10], [{"i": 8}, {"i": 9}])]


def test_a_committed_window_is_never_offered_again(source):
    fill(source.stream("events"), 4)
    first, _ = collect(source, size=2, consumer="c")
    again, _ = collect(source, size=2, consumer="c")
    assert len(first) == 2 and again == []


def test_two_consumers_each_see_every_window(source):
    stream = source.stream("events")
    stream.consumer("a"), stream.consumer("b")  # registered before the rows, like a DAG's stages
    fill(stream, 4)
    a, _ = collect(source, size=2, consumer="a")
    b, _ = collect(source, size=4, consumer="b")
    assert [w[1] for w in a] == [[1, 2], [3, 4]] and [w[1] for w in b] == [[1, 2, 3, 4]]


def test_fixed_windows_are_back_to_back_half_open_intervals_of_commit_time(source):
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events")
        stream.append({"i": 0})            # 00:00:00
        clock.advance(4.999)
        stream.append({"i": 1})            # 00:00:04.999 -> first interval
        clock.advance(0.001)
        stream.append({"i": 2})            # 00:00:05 exactly -> second interval (half-open)
        clock.advance(3)
        seen, _ = collect(source, interval=5, relaxed=False, consumer="fixed")
        assert [w[1] for w in seen] == [[1, 2]]  # the second interval has not ended yet
        clock.advance(2)                   # 00:00:10
        stream.append({"i": 3})            # belongs to [10, 15)
        more, _ = collect(source, interval=5, relaxed=False, consumer="fixed")
        assert [w[1] for w in more] == [[3]]
        windows = stream.windows("fixed")
        assert [(w.start, w.end) for w in reversed(windows)] == [
            ("2030-01-01T00:00:00.000000Z", "2030-01-01T00:00:05.000000Z"),
            ("2030-01-01T00:00:05.000000Z", "2030-01-01T00:00:10.000000Z"),
        ]


def test_fixed_window_empty_intervals_are_offered_only_with_emit_empty(source):
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events")
        stream.consumer("quiet"), stream.consumer("everything")
        stream.append({"i": 0})
        clock.advance(20)
        stream.append({"i": 1})
        clock.advance(5)
        quiet, _ = collect(source, interval=5, relaxed=False, consumer="quiet")
        assert [(w[1]) for w in quiet] == [[1], [2]]
        seen = []

        def everything(window):
            seen.append((window.start.second, window.end.second, [r.id for r in window.records]))

        source.streaming("events", everything, interval=5, relaxed=False, emit_empty=True, until_idle=True)
        assert seen == [(0, 5, [1]), (5, 10, []), (10, 15, []), (15, 20, []), (20, 25, [2])]


def test_fixed_empty_windows_start_with_the_last_complete_interval_when_nothing_was_ever_appended(source):
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events")
        clock.advance(12)
        seen = []
        stream.streaming(lambda w: seen.append((w.start.second, w.end.second, len(w))), consumer="tick",
                         interval=5, relaxed=False, emit_empty=True, until_idle=True)
        clock.advance(5)
        stream.streaming(lambda w: seen.append((w.start.second, w.end.second, len(w))), consumer="tick",
                         interval=5, relaxed=False, emit_empty=True, until_idle=True)
    assert seen == [(5, 10, 0), (10, 15, 0)]


def test_relaxed_window_takes_every_pending_row_each_interval(source):
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events")
        fill(stream, 3)
        clock.advance(4)
        early, _ = collect(source, interval=5, consumer="relaxed")
        assert early == []
        clock.advance(1)
        first, _ = collect(source, interval=5, consumer="relaxed")
        assert [w[1] for w in first] == [[1, 2, 3]]
        fill(stream, 2, start=3)
        clock.advance(2)
        assert collect(source, interval=5, consumer="relaxed")[0] == []
        clock.advance(3)
        second, _ = collect(source, interval=5, consumer="relaxed")
        assert [w[1] for w in second] == [[4, 5]]
        start, end = stream.windows("relaxed")[0].start, stream.windows("relaxed")[0].end
        assert (start, end) == ("2030-01-01T00:00:05.000000Z", "2030-01-01T00:00:10.000000Z")


@pytest.mark.parametrize("kind", ["count", "fixed", "relaxed"])
def test_a_window_whose_function_raises_is_offered_again_with_the_same_id_and_rows(source, kind):
    args = {"count": {"size": 3}, "fixed": {"interval": 5, "relaxed": False}, "relaxed": {"interval": 5}}[kind]
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events")
        fill(stream, 3)
        clock.advance(6)
        calls = []

        def flaky(window):
            calls.append((window.id, [r.id for r in window.records], window.start, window.end, window.attempts))
            if len(calls) == 1:
                raise RuntimeError("first try fails")

        source.streaming("events", flaky, until_idle=True, retry_delay=0, **args)
        fill(stream, 2, start=3)  # rows after the failure never join the failed window
        clock.advance(6)
        source.streaming("events", flaky, until_idle=True, retry_delay=0, **args)
    assert calls[0][:4] == calls[1][:4] and calls[0][1] == [1, 2, 3]
    assert (calls[0][4], calls[1][4]) == (0, 1)
    assert stream.count("new", consumer="flaky") == (2 if kind == "count" else 0)
    stored = list(reversed(stream.windows("flaky")))
    assert stored[0].attempts == 1 and "first try fails" in stored[0].last_error


def test_a_window_that_keeps_failing_stays_open_and_until_idle_raises(source):
    fill(source.stream("events"), 2)

    def broken(window):
        raise ValueError("nope")

    with pytest.raises(WindowFailedError, match="window 1 of consumer 'broken' failed 3 time") as info:
        source.streaming("events", broken, size=2, until_idle=True, retry_delay=0)
    assert info.value.window_id == 1 and info.value.attempts == 3
    assert source.stream("events").count("new", consumer="broken") == 2
    seen = []
    source.streaming("events", lambda w: seen.append(w.id), size=2, consumer="broken", until_idle=True)
    assert seen == [1]


def test_topic_sink_writes_the_output_in_the_window_commit(source):
    readings = source.topic("readings", Reading, dedup=None)
    totals = source.topic("totals", Total, dedup=None)
    readings.extend([{"sensor": "a", "value": float(v)} for v in range(6)])

    def summarise(window):
        assert all(isinstance(r, Reading) for r in window.data)
        return Total(n=len(window.data), total=sum(r.value for r in window.data))

    consumer = source.streaming("readings", summarise, size=3, sink=totals, until_idle=True)
    assert [(t.n, t.total) for t in totals.iter_new()] == [(3, 3.0), (3, 12.0)]
    assert consumer.rows_out == 2
    assert {r.run_id for r in totals.iter_new(records=True)} == {consumer.run_id}
    run = source.runs(stage="summarise")[0]
    assert (run["kind"], run["status"], run["rows_in"], run["rows_out"]) == ("stream", "succeeded", 6, 2)


def test_an_output_that_does_not_fit_the_sink_topic_fails_the_window_and_commits_nothing(source):
    readings = source.topic("readings", Reading, dedup=None)
    totals = source.topic("totals", Total, dedup=None)
    readings.extend([{"sensor": "a", "value": 1.0}, {"sensor": "b", "value": 2.0}])
    with pytest.raises(WindowFailedError, match="validation error"):
        source.streaming("readings", lambda w: {"n": "many"}, consumer="bad", size=2, sink=totals,
                         until_idle=True, retry_delay=0, max_attempts=1)
    assert totals.count() == 0 and readings.count("new", consumer="bad") == 2


class PutSink:
    def __init__(self):
        self.messages = []

    def put(self, message):
        self.messages.append(message)


def test_a_sink_with_put_gets_each_output_message(source):
    fill(source.stream("events"), 4)
    sink = PutSink()
    source.streaming("events", lambda w: [{"sum": sum(x["i"] for x in w.data)}], consumer="s", size=2,
                     sink=sink, until_idle=True)
    assert sink.messages == [{"sum": 1}, {"sum": 5}]


class EvenValues(WindowEmitter):
    """Windows of ``size`` rows whose value is even, skipping odd ones."""

    def window_ready(self):
        self._rows = [r for r in self.pending() if r.data["i"] % 2 == 0][: self.size]
        return len(self._rows) == self.size, ()

    def query(self, *args):
        return self._rows


def test_a_custom_emitter_decides_its_own_windows(source):
    fill(source.stream("events"), 8)
    seen, _ = collect(source, emitter=EvenValues, size=2, consumer="even")
    assert [[x["i"] for x in w[2]] for w in seen] == [[0, 2], [4, 6]]
    assert source.stream("events").count("new", consumer="even") == 4


def test_a_typed_topic_works_everywhere_a_stream_does(source):
    readings = source.topic("readings", Reading, dedup=None)
    readings.extend([{"sensor": "a", "value": float(v)} for v in range(4)])
    seen, _ = collect(source, "readings", size=2)
    assert [[r.value for r in w[2]] for w in seen] == [[0.0, 1.0], [2.0, 3.0]]


@pytest.mark.parametrize("kwargs, message", [
    ({}, "needs size=N .* or interval=seconds"),
    ({"size": 2, "interval": 5}, "not both"),
    ({"size": 0}, "size must be a positive integer"),
    ({"size": -3}, "size must be a positive integer"),
    ({"size": 2.5}, "size must be a positive integer"),
    ({"interval": 0}, "interval must be a positive number"),
    ({"emitter": dict}, "emitter= must be a subclass of minikafka.WindowEmitter"),
    ({"emitter": "CountWindow"}, "emitter= must be a subclass"),
    ({"size": 2, "workers": 0}, "workers must be an integer from 1 to"),
    ({"size": 2, "sink": object()}, "sink= takes a Topic or an object with put"),
    ({"size": 2, "bogus": 1}, r"unknown streaming\(\) argument\(s\): \['bogus'\]"),
])
def test_bad_streaming_arguments_raise_a_clear_error_and_store_nothing(source, kwargs, message):
    fill(source.stream("events"), 2)
    with pytest.raises(StreamingConfigError, match=message):
        source.streaming("events", lambda w: None, until_idle=True, **kwargs)
    assert source._ledger.conn.execute("SELECT count(*) FROM _minikafka_windows").fetchone()[0] == 0
    assert source.stream("events").count("new") == 2


def test_blocking_false_returns_a_handle_that_stops(file_source):
    stream = file_source.stream("events")
    seen = []
    handle = file_source.streaming("events", lambda w: seen.append(w.id), consumer="bg", size=1, blocking=False,
                                   poll=0.01)
    fill(stream, 3)
    for _ in range(500):
        if len(seen) == 3:
            break
        import time

        time.sleep(0.01)
    handle.stop()
    assert seen == [1, 2, 3] and not handle.running and handle.error is None
    assert stream.count("new", consumer="bg") == 0


def test_a_lambda_needs_a_consumer_name(source):
    with pytest.raises(StreamingConfigError, match="pass consumer="):
        source.streaming("events", lambda w: None, size=1, until_idle=True)


def test_retention_deletes_only_rows_every_consumer_handled_and_older_than_max_age(source):
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events", max_age=60)
        stream.consumer("slow")
        fill(stream, 4)
        collect(source, size=1, consumer="fast")
        clock.advance(61)
        stream.append({"i": 4})
        assert source.apply_retention() == {"events": 0}  # "slow" has handled nothing
        collect(source, size=1, consumer="slow")
        assert source.apply_retention() == {"events": 4}
        assert stream.count() == 1 and [r.id for r in stream.iter_new(records=True)] == [5]
        stream.append({"i": 5})
        assert stream.high_watermark() == 6  # ids are never reused


def test_retention_never_deletes_a_row_still_pending(source):
    clock = ManualClock(T0)
    with use_clock(clock):
        stream = source.stream("events", max_age="1m")
        fill(stream, 3)
        clock.advance(3600)
        assert source.apply_retention() == {"events": 0}
        assert stream.count("new") == 3
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            source._ledger.conn.execute('DELETE FROM "events"')


def test_a_bad_max_age_is_refused(source):
    with pytest.raises(ValueError, match="max_age must be a positive duration"):
        source.stream("events", max_age="soon")


def test_forward_on_none_sends_the_windows_rows_to_the_sink_when_the_function_returns_none(tmp_path):
    from minikafka import Source

    with Source(str(tmp_path / "l.sqlite")) as src:
        src.stream("events").extend([{"i": i} for i in range(4)])
        out = src.stream("passed")
        seen = []
        src.streaming("events", lambda w: seen.append(len(w.data)), size=2, sink=out, until_idle=True,
                      forward_on_none=True, consumer="passthrough")
        assert list(out.iter_new()) == [{"i": 0}, {"i": 1}, {"i": 2}, {"i": 3}] and seen == [2, 2]
        skipped = src.stream("skipped")
        src.streaming("events", lambda w: None, size=2, sink=skipped, until_idle=True, consumer="plain")
        assert list(skipped.iter_new()) == []  # the default: None writes nothing
