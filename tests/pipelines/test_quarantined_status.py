"""A stage whose rows all went to the quarantine says so in `run`'s table and in `status`."""

from __future__ import annotations

import pytest

from minikafka import Source
from tests.cli.helpers import invoke
from tests.pipelines.helpers import homelab_copy

pytestmark = pytest.mark.spark

SUITE = '''topic = "rss.youtube"
policy = "quarantine"

[[expect]]
type = "expect_column_values_to_match_regex"
column = "url"
regex = "^never$"
'''


def test_a_stage_that_quarantined_every_row_says_so_in_run_and_status(tmp_path):
    from schemas.homelab import RssItem

    (tmp_path / "never.toml").write_text(SUITE)
    pipeline = homelab_copy(tmp_path, replace={'expectations = ["quality/youtube.toml"]':
                                               f'expectations = ["{tmp_path / "never.toml"}"]'})
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        src.topic("rss.items", RssItem, dedup=("url",)).extend(
            [{"title": f"t{i}", "url": f"https://www.youtube.com/watch?v={i}", "feed": "f", "body": "b",
              "published": "2026-01-01T00:00:00Z"} for i in range(2)])
    out = invoke("run", pipeline, "--stage", "split_youtube", "--in-process")
    assert out.exit_code == 0, out.output
    assert ("QUARANTINED split_youtube: every row it produced went to the quarantine (2), nothing was committed: "
            "minikafka quarantine rss.youtube") in out.output
    status = invoke("status", "--pipeline", pipeline)
    assert "all 2 input row(s) went to the quarantine: minikafka quarantine rss.youtube" in status.output
    with Source(str(tmp_path / "homelab.sqlite")) as src:
        [run] = src.runs()
        assert (run["rows_in"], run["rows_out"], run["rows_quarantined"]) == (2, 0, 2)
        assert [q["topic"] for q in src.quarantined()] == ["rss.youtube", "rss.youtube"]
