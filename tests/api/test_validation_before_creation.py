"""API calls check every argument before creating anything; queue settings on reopening."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel

from minikafka import WindowEmitter
from minikafka.errors import InvalidNameError, StreamingConfigError


class Item(BaseModel):
    url: str


def handler(window):
    return None


@pytest.mark.parametrize("kwargs, error, match", [
    ({"fn": lambda w: None, "size": 1}, StreamingConfigError, "no usable name"),
    ({"fn": handler}, StreamingConfigError, "needs size=N"),
    ({"fn": handler, "size": 0}, StreamingConfigError, "size must be"),
    ({"fn": handler, "size": 1, "interval": 5}, StreamingConfigError, "not both"),
    ({"fn": handler, "interval": -1}, StreamingConfigError, "interval must be"),
    ({"fn": handler, "emitter": object}, StreamingConfigError, "emitter= must be"),
    ({"fn": handler, "size": 1, "workers": 0}, StreamingConfigError, "workers"),
    ({"fn": handler, "size": 1, "max_attempts": 0}, StreamingConfigError, "max_attempts"),
    ({"fn": handler, "size": 1, "retry_delay": -1}, StreamingConfigError, "retry_delay"),
    ({"fn": handler, "size": 1, "poll": 0}, StreamingConfigError, "poll"),
    ({"fn": handler, "size": 1, "sink": 42}, StreamingConfigError, "sink="),
    ({"fn": handler, "size": 1, "bogus": 1}, StreamingConfigError, "unknown streaming"),
    ({"fn": handler, "size": 1, "consumer": "no spaces"}, InvalidNameError, "consumer"),
    ({"fn": 42, "size": 1}, StreamingConfigError, "decorates a function"),
    ({"fn": handler, "interval": 1e300}, StreamingConfigError, r"interval must be .* at most 315576000 .*1e\+300"),
    ({"fn": handler, "interval": 5, "relaxed": False, "emit_empty": "yes"}, StreamingConfigError,
     "emit_empty must be True or False, got 'yes'"),
    ({"fn": handler, "size": 1, "workers": 10**6}, StreamingConfigError, "workers must be an integer from 1 to"),
])
def test_streaming_with_a_bad_argument_creates_no_topic(source, kwargs, error, match):
    fn = kwargs.pop("fn")
    with pytest.raises(error, match=match):
        source.streaming("nosuch", fn, until_idle=True, **kwargs)
    assert source.topics() == []


def test_streaming_decorator_with_a_bad_argument_creates_no_topic(source):
    with pytest.raises(StreamingConfigError, match="size must be"):
        source.streaming("nosuch", size="2", until_idle=True)
    decorate = source.streaming("nosuch", size=1, until_idle=True)
    with pytest.raises(StreamingConfigError, match="no usable name"):
        decorate(lambda w: None)
    assert source.topics() == []


def test_streaming_with_a_bad_emitter_argument_creates_no_topic(source):
    class Even(WindowEmitter):
        def window_ready(self):
            return False, ()

    with pytest.raises(StreamingConfigError, match="size must be"):
        source.streaming("nosuch", handler, emitter=Even, size=-1, until_idle=True)
    assert source.topics() == []


def test_streaming_on_a_missing_name_creates_an_empty_stream_and_says_so(source, caplog):
    with caplog.at_level(logging.INFO, logger="minikafka.streams"):
        loop = source.streaming("typo_topic", handler, size=1, until_idle=True)
    assert loop.created_stream is True and loop.windows_committed == 0
    assert source.topics() == ["typo_topic"]
    assert "created an empty stream" in caplog.text and "typo_topic" in caplog.text
    again = source.streaming("typo_topic", handler, size=1, until_idle=True)
    assert again.created_stream is False


def test_streaming_on_an_existing_stream_does_not_report_a_creation(source):
    source.stream("sensors").append({"t": 1})
    loop = source.streaming("sensors", handler, size=1, until_idle=True)
    assert loop.created_stream is False and loop.windows_committed == 1


@pytest.mark.parametrize("kwargs, match", [
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": True}, "max_attempts"),
    ({"visibility_timeout": 0}, "visibility_timeout"),
    ({"visibility_timeout": float("inf")}, "visibility_timeout"),
    ({"clock": 5}, "clock"),
])
def test_queue_with_a_bad_setting_creates_no_topic(file_source, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        file_source.queue("q", Item, **kwargs)
    assert file_source.topics() == []


def test_topic_queue_with_a_bad_setting_registers_no_consumer(file_source):
    topic = file_source.topic("feed", Item, dedup=None)
    with pytest.raises(ValueError, match="max_attempts"):
        topic.queue("worker", max_attempts=0)
    with pytest.raises(InvalidNameError):
        topic.queue("bad name")
    assert topic.consumers() == []


def test_reopening_a_queue_without_settings_keeps_the_stored_ones(file_source):
    file_source.queue("q", Item, visibility_timeout=42, max_attempts=5)
    reopened = file_source.queue("q", Item)
    assert (reopened.visibility_timeout, reopened.max_attempts) == (42, 5)
    via_topic = file_source.topic("q", Item, dedup=None).queue("q")
    assert (via_topic.visibility_timeout, via_topic.max_attempts) == (42, 5)
    from minikafka.api.modes.queues import stored_settings

    assert stored_settings(file_source, "q", "q") == (42, 5)


def test_reopening_a_queue_with_one_setting_updates_only_that_one_and_logs_it(file_source, caplog):
    file_source.queue("q", Item, visibility_timeout=42, max_attempts=3)
    with caplog.at_level(logging.INFO, logger="minikafka.queues"):
        q = file_source.queue("q", Item, max_attempts=5)
    assert (q.visibility_timeout, q.max_attempts) == (42, 5)
    assert "settings changed" in caplog.text and "max_attempts=3" in caplog.text
    from minikafka.api.modes.queues import stored_settings

    assert stored_settings(file_source, "q", "q") == (42, 5)


def test_a_new_queue_without_settings_gets_the_defaults(file_source):
    q = file_source.queue("q", Item)
    assert (q.visibility_timeout, q.max_attempts) == (300, 3)


@pytest.mark.parametrize("kwargs", [{"interval": 1e300}, {"interval": 1e300, "relaxed": False},
                                    {"interval": 10**400}])
def test_a_huge_streaming_interval_is_one_line_naming_it_and_registers_nothing(file_source, kwargs):
    file_source.topic("items", Item, dedup=None).append({"url": "u"})
    with pytest.raises(StreamingConfigError, match="interval must be a positive number of seconds, at most"):
        file_source.streaming("items", handler, until_idle=True, **kwargs)
    assert file_source.runs(limit=5) == []
    assert file_source.topic("items", Item, dedup=None).consumers() == []
