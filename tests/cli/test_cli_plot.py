"""minikafka plot: Mermaid text with stage names on the edges, images drawn by Graphviz's dot,
and topics whose names differ only in punctuation kept apart."""

from __future__ import annotations

import re
import shutil

import pytest

from minikafka import Source
from tests.cli.helpers import invoke
from tests.pipelines.helpers import homelab_copy

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")

PUNCTUATED = """
[pipeline]
name = "punctuated"
source = "{db}"

[topics."a.b"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[topics."a_b"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[topics."a-b"]
model = "schemas.homelab:RssItem"
dedup = ["url"]

[[stages]]
name = "first"
job = "jobs.split_youtube"
inputs = ["a.b"]
outputs = ["a_b"]

[[stages]]
name = "second"
job = "jobs.keep_articles"
inputs = ["a_b"]
outputs = ["a-b"]
"""


def test_plot_prints_mermaid_with_the_stage_on_each_edge(tmp_path):
    pipeline = homelab_copy(tmp_path)
    out = invoke("plot", pipeline)
    assert out.exit_code == 0, out.output
    assert out.output.startswith("graph TD\n")
    assert "rss_items -->|split_youtube| rss_youtube" in out.output
    assert "rss_summaries -->|score| rss_scored" in out.output
    bare = invoke("plot", pipeline, "--no-stages")
    assert "rss_items --> rss_youtube" in bare.output and "|" not in bare.output.replace("new: ", "")


def test_topics_a_dot_b_a_underscore_b_and_a_dash_b_are_three_nodes(tmp_path):
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PUNCTUATED.format(db=tmp_path / "p.sqlite"))
    out = invoke("plot", pipeline)
    assert out.exit_code == 0, out.output
    edges = re.findall(r"^\s+(\S+) -->\|(\w+)\| (\S+)$", out.output, re.M)
    assert len(edges) == 2 and all(src != dst for src, _stage, dst in edges)
    assert edges[0][2] == edges[1][0] == "a_b"  # the edge goes on from the very node it reached
    assert len({edges[0][0], edges[0][2], edges[1][2]}) == 3


@needs_dot
def test_plot_draws_an_svg_with_topics_stages_and_counts(tmp_path):
    pipeline = homelab_copy(tmp_path)
    Source(str(tmp_path / "homelab.sqlite")).close()
    target = tmp_path / "homelab.svg"
    out = invoke("plot", pipeline, "--counts", "--output", target)
    assert out.exit_code == 0, out.output
    assert f"plot: wrote {target} (svg" in out.output
    svg = target.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for text in ("rss.items", "rss.scored", "split_youtube", "llm_summary", "new: 0 | handled: 0"):
        assert text in svg, text


@needs_dot
def test_plot_draws_png_and_writes_dot_and_mermaid_files(tmp_path):
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(PUNCTUATED.format(db=tmp_path / "p.sqlite"))
    png = tmp_path / "g.png"
    assert invoke("plot", pipeline, "-o", png).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dot = tmp_path / "g.dot"
    assert invoke("plot", pipeline, "-o", dot).exit_code == 0
    text = dot.read_text()
    assert '"a.b" -> "a_b" [label="first"]' in text and '"a_b" -> "a-b" [label="second"]' in text
    mmd = tmp_path / "g.mmd"
    assert invoke("plot", pipeline, "-o", mmd).exit_code == 0
    assert mmd.read_text().startswith("graph TD\n")


def test_plot_refuses_an_output_suffix_it_cannot_draw(tmp_path):
    pipeline = homelab_copy(tmp_path)
    out = invoke("plot", pipeline, "-o", tmp_path / "g.jpeg")
    assert out.exit_code == 1 and "cannot tell the format from the suffix .jpeg" in out.output
    assert not (tmp_path / "g.jpeg").exists()


def test_plot_without_graphviz_names_the_package_to_install(tmp_path, monkeypatch):
    pipeline = homelab_copy(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    out = invoke("plot", pipeline, "-o", tmp_path / "g.svg")
    assert out.exit_code == 1 and "apt-get install graphviz" in out.output
    assert not (tmp_path / "g.svg").exists()
