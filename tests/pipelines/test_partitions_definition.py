"""Pipeline files: topic partitions and key, a stage's ``partitions = [0, 1]``, deliveries beside stages."""

from __future__ import annotations

import pytest

from minikafka.connectors.delivery import load_deliveries
from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from minikafka.pipelines.launch.inprocess import build_stage
from minikafka.pipelines.opening import open_source
from tests.pipelines.helpers import homelab_copy

YOUTUBE = '[topics."rss.youtube"]\nmodel = "schemas.homelab:RssItem"\ndedup = ["url"]\n'
TRANSCRIBE = 'name = "transcribe"\njob = "jobs.transcribe"\n'


def test_a_stage_names_the_topic_partitions_it_consumes(tmp_path):
    path = homelab_copy(tmp_path, replace={
        YOUTUBE: YOUTUBE + 'partitions = 2\nkey = ["url"]\n',
        TRANSCRIBE: TRANSCRIBE + "partitions = [1]\n",
    })
    defn = load_pipeline(path)
    sd = defn.stage("transcribe")
    assert sd.topic_partitions == [1] and sd.partitions is None
    assert (defn.topics["rss.youtube"].partitions, defn.topics["rss.youtube"].key) == (2, ("url",))
    assert build_stage(defn, sd).topic_partitions == [1]
    with open_source(defn) as source:
        assert source.layout("rss.youtube").partitions == 2


@pytest.mark.parametrize("stage_line, match", [
    ("partitions = [5]\n", r"topic 'rss.youtube' has partitions 0..1; \[5\] do not exist"),
    ('partitions = ["a"]\n', "expected a list of topic partitions"),
])
def test_bad_stage_partitions_name_the_stage_and_key(tmp_path, stage_line, match):
    path = homelab_copy(tmp_path, replace={YOUTUBE: YOUTUBE + "partitions = 2\n", TRANSCRIBE: TRANSCRIBE + stage_line})
    with pytest.raises(PipelineDefinitionError, match=f"stages.transcribe.partitions: {match}"):
        load_pipeline(path)


def test_an_integer_partitions_keeps_meaning_jdbc_read_partitions(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path, replace={TRANSCRIBE: TRANSCRIBE + "partitions = 4\n"}))
    assert defn.stage("transcribe").partitions == 4 and defn.stage("transcribe").topic_partitions is None


def test_a_pipeline_file_may_hold_deliveries(tmp_path):
    path = homelab_copy(tmp_path, extra='\n[[deliveries]]\nname = "notify"\ntopic = "rss.scored"\n'
                                         'endpoint = "http://127.0.0.1:9/hook"\n')
    assert [s.name for s in load_pipeline(path).stages]
    defn = load_deliveries(path)
    assert defn.source == tmp_path / "homelab.sqlite" and defn.deliveries[0].name == "notify"
