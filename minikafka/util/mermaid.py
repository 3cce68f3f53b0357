"""Mermaid ``graph TD`` rendering of a pipeline DAG.

Node ids never collide: a topic whose name is a plain identifier keeps it as its id
(``rss_items``); any other name is made plain (``rss.items`` -> ``rss_items``) unless
that id is taken by another topic of the same graph, when a number is added
(``a.b``, ``a_b`` and ``a-b`` are three nodes: ``a_b``, ``a_b_2``, ``a_b_3``). Mermaid's
keywords (``end``, ``graph``, ...) are never ids. Every node whose id differs from its
name carries the name as its label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# words Mermaid's flowchart grammar reads as keywords when they stand alone as an id
_KEYWORDS = {"end", "graph", "flowchart", "subgraph", "style", "class", "classdef", "click", "linkstyle",
             "direction", "default", "call", "href", "callback", "interpolate"}


def _plain(name: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or not (base[0].isalpha() or base[0] == "_"):
        base = "n_" + base
    return base + "_" if base.lower() in _KEYWORDS else base


def node_ids(names: Iterable[str]) -> dict[str, str]:
    """name -> Mermaid node id, distinct for distinct names (in the order given).

    Names that are already plain identifiers (and no keyword) keep themselves; the others
    get their plain form, numbered (``_2``, ``_3``, ...) when another name holds it.
    """
    ordered = list(dict.fromkeys(names))
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for name in ordered:  # names that are their own id first: they can never be renamed
        if _PLAIN.match(name) and name.lower() not in _KEYWORDS:
            ids[name] = name
            taken.add(name)
    for name in ordered:
        if name in ids:
            continue
        base = candidate = _plain(name)
        n = 1
        while candidate in taken:
            n += 1
            candidate = f"{base}_{n}"
        ids[name] = candidate
        taken.add(candidate)
    return ids


def label_text(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label (quotes and angle brackets as entities)."""
    return (text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")
            .replace("|", "#124;"))


def _names(edges: list[tuple[str, str | None]]) -> list[str]:
    names: list[str] = []
    for src, dst in edges:
        for n in (src, dst):
            if n is not None and n not in names:
                names.append(n)
    return names


def edge_labels(edges: list[tuple[str, str | None]], stages: list[str | None] | None) -> dict:
    """(source, target) -> the names of the stages along that edge, joined by ', '."""
    found: dict[tuple[str, str | None], list[str]] = {}
    for (src, dst), stage in zip(edges, stages or [None] * len(edges)):
        names = found.setdefault((src, dst), [])
        if stage and stage not in names:
            names.append(stage)
    return {edge: ", ".join(names) for edge, names in found.items() if names}


def render(edges: list[tuple[str, str | None]], counts: dict[str, tuple[int, int]] | None = None,
           stages: list[str | None] | None = None, dashed: set[tuple[str, str]] | None = None) -> str:
    """Render edges (source, target or None) as a Mermaid graph.

    Args:
        edges: in declaration order; duplicates are printed once.
        counts: topic -> (new, handled); when given, every node is labelled with them.
        stages: the stage name of each edge (same order as ``edges``), printed on the
            edge (``a -->|split| b``); several stages along one edge are joined by ', '.
        dashed: edges drawn dashed (``a -.-> b``): a stage's lookups, read whole, never acked.
    """
    lines = ["graph TD"]
    names = _names(edges)
    ids = node_ids(names)
    for n in names:
        if counts is not None:
            new, handled = counts.get(n, (0, 0))
            lines.append(f'    {ids[n]}["{label_text(n)}<br/>new: {new} | handled: {handled}"]')
        elif ids[n] != n:
            lines.append(f'    {ids[n]}["{label_text(n)}"]')
    labels = edge_labels(edges, stages)
    seen = set()
    for src, dst in edges:
        if (src, dst) in seen:
            continue
        seen.add((src, dst))
        if dst is None:
            lines.append(f"    {ids[src]}")
        else:
            arrow = "-.->" if dashed and (src, dst) in dashed else "-->"
            label = f"|{label_text(labels[src, dst])}|" if (src, dst) in labels else ""
            lines.append(f"    {ids[src]} {arrow}{label} {ids[dst]}")
    return "\n".join(lines)
