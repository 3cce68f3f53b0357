"""A pipeline file is checked against a schema: wrong types and unknown keys name the key path."""

from __future__ import annotations

import pytest

from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from tests.cli.helpers import invoke
from tests.pipelines.helpers import ROOT, homelab_copy

ITEMS = '[topics."rss.items"]\nmodel = "schemas.homelab:RssItem"\ndedup = ["url"]'
SCORE = 'name = "score"\njob = "jobs.score"'


def _error(tmp_path, **kwargs) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = homelab_copy(tmp_path, **kwargs)
    with pytest.raises(PipelineDefinitionError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert all(line.startswith(f"{path}: ") for line in message.splitlines()), message
    return message


def test_source_given_as_number_names_the_key(tmp_path):
    message = _error(tmp_path, replace={'source = "': 'source = 5\n# "'})
    assert "pipeline.source: expected the SQLite ledger's path as a string" in message
    assert message.endswith("got the number 5")


def test_topics_given_as_number_names_the_key(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('topics = 5\n[pipeline]\nsource = "a.sqlite"\n')
    with pytest.raises(PipelineDefinitionError, match=r"topics: expected a table of topics.*got the number 5"):
        load_pipeline(path)
    assert not (tmp_path / "a.sqlite").exists()


def test_dedup_given_as_string_names_the_key(tmp_path):
    message = _error(tmp_path, replace={ITEMS: ITEMS.replace('["url"]', '"url"')})
    assert message.endswith('topics."rss.items".dedup: expected a list of field names, e.g. ["url"], '
                            'got the string "url"')


def test_expectations_given_as_string_names_the_key(tmp_path):
    message = _error(tmp_path, replace={'expectations = ["quality/scored.toml"]': 'expectations = "x.toml"'})
    assert message.endswith('stages.score.expectations: expected a list of suite files, e.g. '
                            '["quality/scored.toml"], got the string "x.toml"')


def test_unknown_key_is_reported_with_suggestion(tmp_path):
    message = _error(tmp_path, replace={'expectations = ["quality/scored.toml"]': 'expectation = ["x.toml"]'})
    assert message.endswith("stages.score: unknown key 'expectation' (did you mean 'expectations'?)")
    top = _error(tmp_path / "top", replace={f"[[stages]]\n{SCORE}": f"[[stage]]\n{SCORE}"})
    assert top.endswith("top level: unknown key 'stage' (did you mean 'stages'?)")
    far = _error(tmp_path / "far", replace={SCORE: f"{SCORE}\nbogus = 1"})
    assert "stages.score: unknown key 'bogus'; expected one of ['consumer', 'description'" in far


def test_unknown_key_inside_a_topic_or_trigger_names_its_table(tmp_path):
    assert 'topics."rss.items": unknown key \'dedupe\' (did you mean \'dedup\'?)' in _error(
        tmp_path, replace={ITEMS: ITEMS + "\ndedupe = [\"url\"]"})
    assert "stages.score.trigger: unknown key 'row' (did you mean 'rows'?)" in _error(
        tmp_path / "t", replace={SCORE: SCORE + "\ntrigger = { row = 5 }"})


def test_every_shape_problem_is_reported_at_once(tmp_path):
    message = _error(tmp_path, replace={SCORE: 'name = "score"\njob = 5\nmax_attempts = true\nspark = 3'})
    lines = [line.split(": ", 1)[1] for line in message.splitlines()]
    assert lines == ['stages.score.job: expected a job module as a string, e.g. "jobs.score", got the number 5',
                     "stages.score.max_attempts: expected an integer >= 1, got the boolean true",
                     'stages.score.spark: expected a table of Spark settings, e.g. { "spark.executor.memory" = '
                     '"2g" }, got the number 3']


def test_missing_keys_are_named_with_what_they_expect(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[pipeline]\nsource = "a.sqlite"\n[[stages]]\nname = "a"\njob = "jobs.score"\n')
    with pytest.raises(PipelineDefinitionError) as info:
        load_pipeline(path)
    assert str(info.value).splitlines() == [
        f"{path}: stages.a: missing key 'inputs' (a list of topic names, e.g. [\"rss.items\"])",
        f"{path}: stages.a: missing key 'outputs' (a list of topic names, e.g. [\"rss.scored\"])"]


def test_a_bad_pipeline_file_exits_2_naming_the_key_without_traceback(tmp_path):
    path = homelab_copy(tmp_path, replace={ITEMS: ITEMS.replace('["url"]', '"url"')})
    for command in ("run", "check", "plan"):
        out = invoke(command, path)
        assert out.exit_code == 2, (command, out.output)
        assert 'topics."rss.items".dedup: expected a list of field names' in out.output
        assert "Traceback" not in out.output
    assert not (tmp_path / "homelab.sqlite").exists()


def test_shipped_pipeline_files_load_as_before(tmp_path):
    for path in sorted((ROOT / "conf").glob("*.toml")):
        defn = load_pipeline(path)
        assert defn.stages and defn.topics
    defn = load_pipeline(homelab_copy(tmp_path, replace={
        SCORE: SCORE + '\ntrigger = { every = { minutes = 5 } }\nspark = { "spark.sql.adaptive.enabled" = false }'}))
    score = defn.stage("score")
    assert score.trigger == {"every": 300.0} and score.spark == {"spark.sql.adaptive.enabled": "False"}
    assert defn.stage("score").inputs == ["rss.summaries"] and defn.master == "local[2]"
