"""Mermaid ``graph TD`` rendering of a pipeline DAG."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def node_id(name: str) -> str:
    """A Mermaid-safe node id for a topic name."""
    return name if _PLAIN.match(name) else re.sub(r"[^A-Za-z0-9_]", "_", name)


def render(edges: list[tuple[str, str | None]], counts: dict[str, tuple[int, int]] | None = None) -> str:
    """Render edges (source, target or None) as a Mermaid graph.

    Args:
        edges: in declaration order; duplicates are printed once.
        counts: topic -> (new, handled); when given, every node is labelled with them.
    """
    lines = ["graph TD"]
    names: list[str] = []
    for src, dst in edges:
        for n in (src, dst):
            if n is not None and n not in names:
                names.append(n)
    for n in names:
        if counts is not None:
            new, handled = counts.get(n, (0, 0))
            lines.append(f'    {node_id(n)}["{n}<br/>new: {new} | handled: {handled}"]')
        elif node_id(n) != n:
            lines.append(f'    {node_id(n)}["{n}"]')
    seen = set()
    for src, dst in edges:
        if (src, dst) in seen:
            continue
        seen.add((src, dst))
        lines.append(f"    {node_id(src)}" if dst is None else f"    {node_id(src)} --> {node_id(dst)}")
    return "\n".join(lines)
