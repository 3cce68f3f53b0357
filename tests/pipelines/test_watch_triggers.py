"""Watch triggers and window/trigger keys of pipeline files (pure Python: no JVM)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from minikafka import Source
from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from minikafka.pipelines.opening import open_source
from minikafka.pipelines.watch import Watch
from minikafka.util.clock import ManualClock, use_clock
from tests.pipelines.helpers import homelab_copy

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
SPLIT = 'name = "split_youtube"\njob = "jobs.split_youtube"'


def item(i: int) -> dict:
    return {"url": f"https://example.com/{i}", "feed": "f", "title": f"t{i}", "body": "b",
            "published": "2030-01-01T00:00:00Z"}


def with_trigger(tmp_path, trigger: str):
    return load_pipeline(homelab_copy(tmp_path, replace={SPLIT: f"{SPLIT}\ntrigger = {trigger}"}))


def due(watch: Watch, defn, stage="split_youtube"):
    with Source(str(defn.source)) as source:
        return watch._due(source, watch.states[stage])


def append(defn, start: int, n: int) -> None:
    with open_source(defn) as source:
        source._topics["rss.items"].extend([item(i) for i in range(start, start + n)])


def test_a_rows_trigger_fires_only_at_n_new_rows(tmp_path):
    defn = with_trigger(tmp_path, "{ rows = 5 }")
    watch = Watch(defn, until_idle=True, echo=lambda m: None)
    append(defn, 0, 4)
    assert due(watch, defn) is None
    append(defn, 4, 1)
    assert due(watch, defn) == ("5 new row(s) >= 5", None)


def test_an_every_trigger_fires_once_per_period(tmp_path):
    clock = ManualClock(T0)
    with use_clock(clock):
        defn = with_trigger(tmp_path, '{ every = "5m" }')
        watch = Watch(defn, echo=lambda m: None)
        append(defn, 0, 2)
        assert due(watch, defn) == ("every 300s", None)  # never ran: due at once
        watch.states["split_youtube"].last_run = clock()
        clock.advance(299)
        assert due(watch, defn) is None
        clock.advance(1)
        assert due(watch, defn) is not None


def test_a_fixed_trigger_takes_the_rows_committed_before_the_last_boundary(tmp_path):
    clock = ManualClock(T0)
    with use_clock(clock):
        defn = with_trigger(tmp_path, '{ every = "5m", fixed = true }')
        watch = Watch(defn, echo=lambda m: None)
        clock.advance(60)
        append(defn, 0, 3)  # ids 1..3 at 00:01
        assert due(watch, defn) is None  # the interval [00:00, 00:05) has not ended
        clock.advance(240)
        append(defn, 3, 2)  # ids 4..5 at 00:05, in the next interval
        assert due(watch, defn) == ("interval ending 2030-01-01T00:05:00.000000Z", {"rss.items": 3})


def test_the_default_trigger_waits_for_a_quiet_moment_but_not_in_until_idle(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    append(defn, 0, 3)
    watch = Watch(defn, echo=lambda m: None)
    watch.states["split_youtube"].seen = 0
    assert due(watch, defn) is None  # just changed: debounced
    watch.states["split_youtube"].changed_at -= 1
    assert due(watch, defn) == ("3 new row(s)", None)
    assert due(Watch(defn, until_idle=True, echo=lambda m: None), defn) == ("3 new row(s)", None)


def test_rows_a_best_effort_run_left_failing_are_not_new_work(tmp_path):
    defn = with_trigger(tmp_path, "{ rows = 1 }")
    watch = Watch(defn, until_idle=True, echo=lambda m: None)
    append(defn, 0, 2)
    watch.states["split_youtube"].left_pending = 2
    assert due(watch, defn) is None
    append(defn, 2, 1)
    assert due(watch, defn) is not None


@pytest.mark.parametrize("text, match", [
    ("{ rows = 10, when = 3 }", r"stages.split_youtube.trigger: unknown key 'when'"),
    ("{ rows = 0 }", r"stages.split_youtube.trigger.rows: must be a positive integer"),
    ('{ every = "soon" }', r"stages.split_youtube.trigger.every: every must be a positive duration"),
    ("{ fixed = true }", r"fixed = true needs every"),
    ('{ rows = 5, every = "1m" }', "rows or every, not both"),
    ('"5m"', 'stages.split_youtube.trigger: expected a table such as .* got the string "5m"'),
])
def test_a_bad_trigger_is_a_clear_error_naming_it(tmp_path, text, match):
    with pytest.raises(PipelineDefinitionError, match=match):
        with_trigger(tmp_path, text)


@pytest.mark.parametrize("text, match", [
    ("{ rows = -1 }", r"stages.split_youtube.window.rows: must be a positive integer"),
    ("{ bytes = 10 }", r"stages.split_youtube.window: unknown key 'bytes'"),
    ("{ }", "stages.split_youtube.window: missing key 'rows'"),
])
def test_a_bad_window_is_a_clear_error_naming_it(tmp_path, text, match):
    with pytest.raises(PipelineDefinitionError, match=match):
        load_pipeline(homelab_copy(tmp_path, replace={SPLIT: f"{SPLIT}\nwindow = {text}"}))


def test_window_and_trigger_are_read_from_the_pipeline_file(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path, replace={
        SPLIT: f'{SPLIT}\nwindow = {{ rows = 100 }}\ntrigger = {{ every = "90s", debounce = "1s" }}'}))
    sd = defn.stage("split_youtube")
    assert sd.window_rows == 100 and sd.trigger == {"every": 90.0, "debounce": 1.0}
