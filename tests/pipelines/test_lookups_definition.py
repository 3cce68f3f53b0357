"""``lookups = [...]`` on a stage: checked with the key path named, and ordering the DAG."""

from __future__ import annotations

import pytest

from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from minikafka.pipelines.definition import select_stages

HEAD = '''
[pipeline]
source = "ledger.sqlite"

[topics."flights"]
model = "tests.pipelines.lookup_jobs:Flight"
dedup = ["flight_id"]

[topics."airlines"]
model = "tests.pipelines.lookup_jobs:Airline"
dedup = ["carrier"]

[topics."airlines.raw"]
model = "tests.pipelines.lookup_jobs:Airline"
dedup = ["carrier"]

[topics."enriched"]
model = "tests.pipelines.lookup_jobs:Enriched"
dedup = ["flight_id"]
'''

ENRICH = '''
[[stages]]
name = "enrich"
job = "tests.pipelines.lookup_jobs"
inputs = ["flights"]
outputs = ["enriched"]
{lookups}
'''

AIRLINES = '''
[[stages]]
name = "airlines"
job = "tests.pipelines.lookup_airlines_job"
inputs = ["airlines.raw"]
outputs = ["airlines"]
'''


def write(tmp_path, text: str):
    path = tmp_path / "pipeline.toml"
    path.write_text(text)
    return path


def test_a_lookups_producer_runs_before_the_stage_that_looks_it_up(tmp_path):
    defn = load_pipeline(write(tmp_path, HEAD + ENRICH.format(lookups='lookups = ["airlines"]') + AIRLINES))
    assert [s.name for s in defn.stages] == ["airlines", "enrich"]  # declared after, ordered before
    assert defn.stage("enrich").lookups == ["airlines"] and defn.stage("enrich").reads == ["flights", "airlines"]
    assert [s.name for s in select_stages(defn, start="airlines")] == ["airlines", "enrich"]
    assert defn.lookup_edges() == [("airlines", "enriched")]


def test_lookups_may_be_one_name(tmp_path):
    defn = load_pipeline(write(tmp_path, HEAD + ENRICH.format(lookups='lookups = "airlines"')))
    assert defn.stage("enrich").lookups == ["airlines"]


@pytest.mark.parametrize("lookups, match", [
    ('lookups = ["nothing"]', r"stages.enrich.lookups: unknown topic 'nothing'"),
    ('lookups = ["flights"]', r"stages.enrich.lookups: 'flights' is also in inputs"),
    ('lookups = ["enriched"]', r"stages.enrich.lookups: 'enriched' is also in outputs"),
    ('lookups = ["airlines", "airlines"]', r"stages.enrich.lookups: names a topic twice"),
    ("lookups = 3", r"stages.enrich.lookups: expected a list of topic or table names read whole"),
    ("lookups = []", r"stages.enrich.lookups"),
])
def test_bad_lookups_name_the_file_stage_and_key(tmp_path, lookups, match):
    path = write(tmp_path, HEAD + ENRICH.format(lookups=lookups))
    with pytest.raises(PipelineDefinitionError, match=match) as info:
        load_pipeline(path)
    assert str(path) in str(info.value)


def test_a_row_fn_job_with_lookups_is_refused(tmp_path):
    text = HEAD + ENRICH.format(lookups='lookups = ["airlines"]').replace("tests.pipelines.lookup_jobs\"",
                                                                          "tests.pipelines.lookup_rowfn_job\"")
    with pytest.raises(PipelineDefinitionError, match=r"stages.enrich.lookups: a row_fn job cannot take lookups"):
        load_pipeline(write(tmp_path, text))


def test_plot_draws_lookup_edges_dashed(tmp_path):
    from tests.cli.helpers import invoke

    path = write(tmp_path, HEAD + ENRICH.format(lookups='lookups = ["airlines"]') + AIRLINES)
    out = invoke("plot", path)
    assert out.exit_code == 0, out.output
    assert "flights -->|enrich| enriched" in out.output
    assert "airlines -.->|enrich| enriched" in out.output
    assert "airlines_raw -->|airlines| airlines" in out.output
