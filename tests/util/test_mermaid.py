"""util.mermaid: node ids never collide, keywords are never ids, stage names label the edges."""

from __future__ import annotations

import re

from minikafka.util.mermaid import node_ids, render


def _edges_of(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^\s+(\S+) -->(?:\|[^|]*\|)? (\S+)$", text, re.M)


def test_topics_that_differ_only_in_punctuation_are_three_nodes_without_self_loops():
    text = render([("a.b", "a_b"), ("a_b", "a-b")])
    edges = _edges_of(text)
    assert len(edges) == 2 and all(src != dst for src, dst in edges)
    ids = node_ids(["a.b", "a_b", "a-b"])
    assert len(set(ids.values())) == 3 and ids["a_b"] == "a_b"  # a plain name keeps itself
    for name, nid in ids.items():
        if nid != name:
            assert f'{nid}["{name}"]' in text


def test_a_numbered_id_never_takes_the_name_of_another_topic():
    ids = node_ids(["a.b", "a-b", "a_b_2", "a_b"])
    assert len(set(ids.values())) == 4 and ids["a_b_2"] == "a_b_2" and ids["a_b"] == "a_b"


def test_mermaid_keywords_are_never_node_ids():
    ids = node_ids(["end", "graph", "End.x"])
    assert ids["end"] != "end" and ids["graph"] != "graph" and len(set(ids.values())) == 3
    assert 'end_["end"]' in render([("end", "graph")])


def test_stage_names_label_the_edges_and_plain_graphs_are_unchanged():
    assert render([("items", "out")]) == "graph TD\n    items --> out"
    text = render([("rss.items", "rss.youtube"), ("rss.items", "rss.youtube")], stages=["split", "again"])
    assert "rss_items -->|split, again| rss_youtube" in text
