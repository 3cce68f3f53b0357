"""Pipeline files: the DAG from topics, and clear errors before anything runs."""

from __future__ import annotations

import pytest

from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from minikafka.pipelines.definition import select_stages
from tests.pipelines.helpers import ROOT, homelab_copy


def test_homelab_stages_come_in_dag_order():
    defn = load_pipeline(ROOT / "conf" / "homelab.toml")
    order = [s.name for s in defn.stages]
    assert order.index("split_youtube") < order.index("transcribe") < order.index("score")
    assert order.index("keep_articles") < order.index("llm_summary") < order.index("score")
    assert defn.source == (ROOT / "data" / "homelab.sqlite").resolve()
    assert defn.topics["rss.items"].dedup == ("url",)


def test_stage_and_from_selection(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path))
    assert [s.name for s in select_stages(defn, stage="transcribe")] == ["transcribe"]
    assert [s.name for s in select_stages(defn, start="keep_articles")] == ["keep_articles", "llm_summary", "score"]
    with pytest.raises(PipelineDefinitionError, match="no stage named 'nope'"):
        select_stages(defn, stage="nope")


@pytest.mark.parametrize("replace, match", [
    ({'inputs = ["rss.youtube"]': 'inputs = ["rss.nothing"]'},
     r"stages.transcribe.inputs: unknown topic 'rss.nothing'"),
    ({'job = "jobs.score"': 'job = "jobs.does_not_exist"'},
     r"stages.score.job: cannot import job module 'jobs.does_not_exist'"),
    ({'model = "schemas.homelab:Scored"': 'model = "schemas.homelab:Missing"'},
     r"topics.\"rss.scored\".model: module schemas.homelab has no attribute 'Missing'"),
    ({'name = "score"': 'name = "transcribe"'}, r"stages.transcribe: duplicate stage name"),
    ({'inputs = ["rss.youtube"]\noutputs = ["rss.summaries"]\nstrategy = "best_effort"':
      'inputs = ["rss.youtube"]\noutputs = ["rss.summaries"]\nstrategy = "sometimes"'},
     r"stages.transcribe.strategy: expected 'strict' or 'best_effort', got the string \"sometimes\""),
    ({'dedup = ["url"]\n\n[topics."rss.youtube"]': 'dedup = ["link"]\n\n[topics."rss.youtube"]'},
     r"topics.\"rss.items\".dedup: dedup field\(s\) \['link'\]"),
    ({"[[stages]]\nname = \"score\"": "[[stages]]\nbogus = 1\nname = \"score\""}, r"stages.score: unknown key 'bogus'"),
])
def test_bad_definitions_name_file_stage_and_key(tmp_path, replace, match):
    path = homelab_copy(tmp_path, replace=replace)
    with pytest.raises(PipelineDefinitionError, match=match) as info:
        load_pipeline(path)
    assert str(path) in str(info.value)


def test_cycles_are_rejected_with_the_cycle_named(tmp_path):
    path = homelab_copy(tmp_path, extra='\n[[stages]]\nname = "loop"\njob = "jobs.keep_articles"\n'
                                        'inputs = ["rss.scored"]\noutputs = ["rss.items"]\n')
    with pytest.raises(PipelineDefinitionError, match=r"cycle: .*score -> loop -> "):
        load_pipeline(path)


def test_unreadable_files(tmp_path):
    with pytest.raises(PipelineDefinitionError, match="not found"):
        load_pipeline(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[pipeline\nname=")
    with pytest.raises(PipelineDefinitionError, match="invalid TOML"):
        load_pipeline(bad)
