"""Code written for koaning/minikafka runs unchanged: one test per difference closed (issue 11)."""

from __future__ import annotations

import sqlite3
import tomllib
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import minikafka
from minikafka import Event, FullPipeline, MigrationError, MissingDependencyError, SchemaMismatchError, Source


class Clip(BaseModel):
    creator: str
    url: str
    seconds: int


class ClipV2(BaseModel):
    creator: str
    url: str


class Name(BaseModel):
    name: str


class Inner(BaseModel):
    lang: str
    score: float


class Tagged(BaseModel):
    url: str
    tags: list[str]
    inner: Inner


def clip(n: int) -> dict:
    return {"creator": f"c{n}", "url": f"u{n}", "seconds": n}


# -- on_event ------------------------------------------------------------------------------
def test_on_event_is_called_with_the_event_name_and_minikafkas_keyword_arguments():
    calls = []

    def listener(event, **kwargs):
        calls.append((event, kwargs))

    with Source(":memory:", on_event=listener) as src:
        clips = src.topic("clips", Clip, dedup=("url", "creator"))
        names = src.topic("names", Name, dedup=None)
        clips.append(clip(1))
        clips.pipe(lambda c: Name(name=c.creator)).to(names).run()
        clips.append(clip(2))
        clips.set_handled(2)
    assert calls == [
        ("topic_created", {"name": "clips", "model": "Clip", "dedup": ("creator", "url")}),
        ("topic_created", {"name": "names", "model": "Name", "dedup": ()}),
        ("message_appended", {"topic": "clips", "payload": clip(1)}),
        ("pipeline_start", {"source": "clips", "target": "names"}),
        ("message_appended", {"topic": "names", "payload": {"name": "c1"}}),
        ("message_handled", {"topic": "clips", "id": 1}),
        ("pipeline_end", {"source": "clips", "target": "names", "count": 1, "dry_run": False}),
        ("message_appended", {"topic": "clips", "payload": clip(2)}),
        ("message_handled", {"topic": "clips", "id": 2}),
    ]


def test_an_observer_whose_first_parameter_is_called_name_still_gets_topic_created():
    calls = []
    with Source(":memory:", on_event=lambda name, **kw: calls.append((name, kw))) as src:
        src.topic("clips", Clip, dedup=None).append(clip(1))
    # minikafka loses this event (``name`` given twice); we drop the clashing keyword
    assert calls == [("topic_created", {"model": "Clip", "dedup": ()}),
                     ("message_appended", {"topic": "clips", "payload": clip(1)})]


def test_an_observer_with_fixed_keyword_parameters_gets_no_unexpected_keywords():
    seen = []

    def log(event, topic=None, payload=None, name=None, model=None, dedup=None, id=None):
        seen.append((event, topic or name, payload))

    with Source(":memory:", on_event=log) as src:
        src.topic("clips", Clip, dedup=None).extend([clip(1), clip(2)])
    assert seen == [("topic_created", "clips", None),
                    ("message_appended", "clips", clip(1)), ("message_appended", "clips", clip(2))]


def test_dry_run_pipeline_end_reports_dry_run_and_the_count():
    ends = []
    with Source(":memory:", on_event=lambda name, **kw: ends.append(kw) if name == "pipeline_end" else None) as src:
        clips = src.topic("clips", Clip, dedup=None)
        clips.extend([clip(1), clip(2)])
        clips.pipe(lambda c: c.seconds).run(dry_run=True)
    assert ends == [{"source": "clips", "target": None, "count": 2, "dry_run": True}]


def test_an_observer_annotated_with_event_opts_in_to_event_objects():
    got: list[Event] = []

    def observer(event: Event) -> None:
        got.append(event)

    with Source(":memory:", on_event=observer) as src:
        src.topic("clips", Clip, dedup=None).append(clip(1))
    assert [(e.name, e.topic, e.record_id) for e in got] == [("topic_created", "clips", None),
                                                             ("message_appended", "clips", 1)]
    assert got[1].details["payload"] == clip(1)


def test_a_one_argument_observer_such_as_list_append_gets_event_objects():
    got: list = []
    with Source(":memory:", on_event=got.append) as src:
        src.topic("clips", Clip, dedup=None).append(clip(1))
    assert all(isinstance(e, Event) for e in got) and [e.name for e in got] == ["topic_created", "message_appended"]


def test_observer_exceptions_are_still_swallowed_in_the_minikafka_form():
    def broken(event, **kwargs):
        raise RuntimeError("observer bug")

    with Source(":memory:", on_event=broken) as src:
        clips = src.topic("clips", Clip, dedup=None)
        clips.append(clip(1))
        assert clips.count() == 1


# -- dedup ----------------------------------------------------------------------------------
def test_topic_without_dedup_raises_type_error_mentioning_dedup():
    with Source(":memory:") as src:
        with pytest.raises(TypeError, match="dedup"):
            src.topic("clips", Clip)
        assert src.topics() == []


def test_dedup_none_disables_dedup():
    with Source(":memory:") as src:
        clips = src.topic("clips", Clip, dedup=None)
        clips.append(clip(1))
        clips.append(clip(1))
        assert clips.count() == 2


def test_dedup_field_not_on_the_model_is_a_value_error_before_anything_is_written():
    with Source(":memory:") as src:
        with pytest.raises(ValueError, match=r"dedup fields are not present on model: \['missing'\]"):
            src.topic("clips", Clip, dedup=("url", "missing"))
        assert src.topics() == []


def test_repeated_dedup_field_is_a_value_error_before_anything_is_written():
    with Source(":memory:") as src:
        with pytest.raises(ValueError, match="unique"):
            src.topic("clips", Clip, dedup=("url", "url"))
        assert src.topics() == []


# -- reopening ------------------------------------------------------------------------------
def test_reopening_with_another_model_says_different_schema(tmp_path: Path):
    db = tmp_path / "ledger.sqlite"
    with Source(db) as src:
        src.topic("clips", Clip, dedup=None)
    with Source(db) as src:
        with pytest.raises(SchemaMismatchError, match="exists with a different schema"):
            src.topic("clips", ClipV2, dedup=None)


def test_reopening_with_other_dedup_fields_says_different_dedup_config(tmp_path: Path):
    db = tmp_path / "ledger.sqlite"
    with Source(db) as src:
        src.topic("clips", Clip, dedup=("creator", "url"))
    with Source(db) as src:
        assert src.topic("clips", Clip, dedup=("url", "creator")).name == "clips"
        with pytest.raises(SchemaMismatchError, match="exists with a different dedup config"):
            src.topic("clips", Clip, dedup=("url",))


# -- migrate --------------------------------------------------------------------------------
def test_failed_migration_raises_pydantic_validation_error_and_changes_nothing():
    with Source(":memory:") as src:
        clips = src.topic("clips", Clip, dedup=None)
        clips.extend([clip(1), clip(2)])
        with pytest.raises(ValidationError) as info:
            clips.migrate(ClipV2, lambda c: {"creator": c.creator})
        assert isinstance(info.value, MigrationError)
        assert info.value.errors()[0]["loc"] == ("url",)
        assert "at record 1" in "".join(getattr(info.value, "__notes__", []))
        assert list(clips.iter_new(as_dict=True)) == [clip(1), clip(2)]


def test_failed_migration_function_keeps_its_exception_type():
    def boom(c):
        raise RuntimeError("cannot convert")

    with Source(":memory:") as src:
        clips = src.topic("clips", Clip, dedup=None)
        clips.append(clip(1))
        with pytest.raises(RuntimeError, match="at record 1: cannot convert") as info:
            clips.migrate(ClipV2, boom)
        assert isinstance(info.value, MigrationError)
        assert clips.count() == 1 and next(clips.iter_new()) == Clip(**clip(1))


# -- to_polars ------------------------------------------------------------------------------
def test_to_polars_gives_one_column_per_field():
    with Source(":memory:") as src:
        clips = src.topic("clips", Clip, dedup=None)
        clips.extend([clip(1), clip(2)])
        frame = clips.to_polars()
    assert frame.shape == (2, 3)
    assert frame.columns == ["creator", "url", "seconds"]
    assert frame["seconds"].to_list() == [1, 2]


def test_to_polars_turns_nested_payloads_into_struct_and_list_columns():
    import polars as pl

    with Source(":memory:") as src:
        tagged = src.topic("tagged", Tagged, dedup=("url",))
        tagged.append({"url": "u1", "tags": ["a", "b"], "inner": {"lang": "en", "score": 0.5}})
        frame = tagged.to_polars()
        with_meta = tagged.to_polars(metadata=True)
    assert frame.schema["tags"] == pl.List(pl.String)
    assert isinstance(frame.schema["inner"], pl.Struct)
    assert frame["inner"].struct.field("lang").to_list() == ["en"]
    assert with_meta.columns[0] == "_id"


def test_to_polars_without_polars_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_polars(name, *args, **kwargs):
        if name == "polars" or name.startswith("polars."):
            raise ImportError("No module named 'polars'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "polars", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_polars)
    with Source(":memory:") as src:
        clips = src.topic("clips", Clip, dedup=None)
        with pytest.raises(MissingDependencyError, match=r"minikafka-spark\[polars\]"):
            clips.to_polars()
        with pytest.raises(ImportError):  # minikafka raised ImportError: still caught
            clips.to_polars()


# -- attributes and typing ------------------------------------------------------------------
def test_source_conn_is_the_sqlite_connection_and_is_closed_by_the_context_manager(tmp_path: Path):
    with Source(tmp_path / "ledger.sqlite") as src:
        conn = src._conn
        assert isinstance(conn, sqlite3.Connection)
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


def test_source_conn_is_closed_when_the_block_raises(tmp_path: Path):
    with pytest.raises(KeyError):
        with Source(tmp_path / "ledger.sqlite") as src:
            conn = src._conn
            raise KeyError("boom")
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


def test_repr_of_source_and_topic_is_minikafkas():
    with Source(":memory:") as src:
        assert repr(src) == "Source(':memory:')"
        assert repr(src.topic("clips", Clip, dedup=("url",))) == "Topic('clips', Clip)"


def test_package_ships_a_py_typed_marker():
    assert (Path(minikafka.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["minikafka"]


def test_strategy_is_typed_as_the_two_literals():
    hints = typing.get_type_hints(FullPipeline.run)
    assert typing.get_args(hints["strategy"]) == ("strict", "best_effort")


def test_record_carries_minikafkas_payload_and_dedup_hashes():
    import hashlib
    import json

    from pydantic import BaseModel

    from minikafka import Source

    class Clip(BaseModel):
        url: str
        minutes: int

    def sha(value):
        return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    with Source(":memory:") as src:
        clips = src.topic("clips", Clip, dedup=("url",))
        clips.append({"url": "https://x/1", "minutes": 3})
        record = next(clips.iter_new(records=True))
        plain = src.topic("plain", Clip, dedup=None)
        plain.append({"url": "u", "minutes": 1})
        assert next(plain.iter_new(records=True)).dedup_hash is None
    assert record.payload_hash == sha({"url": "https://x/1", "minutes": 3})
    assert record.dedup_hash == sha({"url": "https://x/1"})
