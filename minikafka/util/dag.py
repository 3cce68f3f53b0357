"""Topological ordering with cycle reporting, shared by Python and Spark pipelines."""

from __future__ import annotations

from collections import defaultdict

from ..errors import PipelineCycleError


def topological_order(nodes: list[str], edges: list[tuple[str, str]]) -> list[str]:
    """Order ``nodes`` so every edge goes forward; ties keep the given order.

    Raises:
        PipelineCycleError: the edges contain a cycle; the message names it
            (``pipeline contains a cycle: a -> b -> a``).
    """
    outgoing: dict[str, list[str]] = defaultdict(list)
    indegree = {n: 0 for n in nodes}
    for src, dst in edges:
        indegree.setdefault(src, 0)
        indegree.setdefault(dst, 0)
        outgoing[src].append(dst)
        indegree[dst] += 1
    order_index = {n: i for i, n in enumerate(indegree)}
    ready = [n for n in indegree if indegree[n] == 0]
    ordered: list[str] = []
    while ready:
        ready.sort(key=order_index.__getitem__)
        node = ready.pop(0)
        ordered.append(node)
        for dst in outgoing[node]:
            indegree[dst] -= 1
            if indegree[dst] == 0:
                ready.append(dst)
    if len(ordered) != len(indegree):
        raise PipelineCycleError("pipeline contains a cycle: " + " -> ".join(find_cycle(outgoing, indegree)))
    return ordered


def find_cycle(outgoing: dict[str, list[str]], indegree: dict[str, int]) -> list[str]:
    """One cycle among the nodes left with a positive indegree, first node repeated at the end."""
    remaining = {n for n, d in indegree.items() if d > 0}
    start = next(n for n in indegree if n in remaining)
    path, seen = [start], {start: 0}
    node = start
    while True:
        node = next(d for d in outgoing[node] if d in remaining)
        if node in seen:
            return path[seen[node]:] + [node]
        seen[node] = len(path)
        path.append(node)
