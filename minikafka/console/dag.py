"""A pipeline's DAG as an SVG drawn on the server: topics and stages in columns, links on each node.

Topics are rectangles coloured by the largest lag of their consumers; stages are rounded
boxes coloured by the outcome of their last run. A stage's lookups (read whole, never acked)
are dashed edges from the looked-up topic or table to the stage. Columns follow the longest path from a
source topic, so every edge points right. No JavaScript, no external file: the SVG sits
inline in the page and each node is a link to its topic or its runs.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 132, 44, 34, 16, 10
STATUS_FILL = {"succeeded": "#d7f0d8", "failed": "#f6d0d0", "partial": "#fbe7c0", "interrupted": "#f6d0d0",
               "running": "#d6e4f5", "unknown": "#fbe7c0"}
NO_RUN_FILL = "#eeeeee"
TOPIC_FILL, LAGGING_FILL = "#e4ecf7", "#fbe7c0"


def _columns(stages: list[dict]) -> dict[tuple[str, str], int]:
    """(kind, name) -> column: the longest path from a node with no input."""
    producers: dict[str, list[str]] = {}
    for s in stages:
        for t in s["outputs"]:
            producers.setdefault(t, []).append(s["name"])
    col: dict[tuple[str, str], int] = {}

    def topic_col(t: str, seen: frozenset) -> int:
        key = ("topic", t)
        if key not in col:
            ups = [stage_col(s, seen) for s in producers.get(t, []) if s not in seen]
            col[key] = max(ups) + 1 if ups else 0
        return col[key]

    by_name = {s["name"]: s for s in stages}

    def stage_col(name: str, seen: frozenset) -> int:
        key = ("stage", name)
        if key not in col:
            ins = [topic_col(t, seen | {name}) for t in _reads(by_name[name])]
            col[key] = max(ins) + 1 if ins else 1
        return col[key]

    for s in stages:
        stage_col(s["name"], frozenset())
        for t in s["outputs"]:
            topic_col(t, frozenset())
    return col


def _reads(stage: dict) -> list[str]:
    """The topics a stage reads: its inputs, then its lookups."""
    return [*stage["inputs"], *stage.get("lookups", ())]


def _label(text: str, limit: int = 19) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def draw(stages: list[dict], last: dict[str, dict], lag: dict[str, int]) -> str:
    """The SVG text of one pipeline.

    Args:
        stages: ``[{name, inputs, outputs, lookups}]`` (``lookups`` optional).
        last: the last run of each stage (its ``status``, ``rows_out``).
        lag: the largest consumer lag of each topic.
    """
    col = _columns(stages)
    rows_in_col: dict[int, int] = {}
    pos: dict[tuple[str, str], tuple[int, int]] = {}
    for key in sorted(col, key=lambda k: (col[k], k[0] != "topic", k[1])):
        c = col[key]
        r = rows_in_col.get(c, 0)
        rows_in_col[c] = r + 1
        pos[key] = (PAD + c * (NODE_W + GAP_X), PAD + r * (NODE_H + GAP_Y))
    width = PAD * 2 + (max(col.values(), default=0) + 1) * (NODE_W + GAP_X) - GAP_X
    height = PAD * 2 + max(rows_in_col.values(), default=1) * (NODE_H + GAP_Y) - GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}"><title>pipeline graph</title>',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#667"/></marker></defs>']
    for s in stages:
        sx, sy = pos[("stage", s["name"])]
        for t in s["inputs"]:
            tx, ty = pos[("topic", t)]
            parts.append(_edge(tx + NODE_W, ty + NODE_H // 2, sx, sy + NODE_H // 2))
        for t in s.get("lookups", ()):
            tx, ty = pos[("topic", t)]
            parts.append(_edge(tx + NODE_W, ty + NODE_H // 2, sx, sy + NODE_H // 2, lookup=True))
        for t in s["outputs"]:
            tx, ty = pos[("topic", t)]
            parts.append(_edge(sx + NODE_W, sy + NODE_H // 2, tx, ty + NODE_H // 2))
    for (kind, name), (x, y) in pos.items():
        if kind == "topic":
            behind = lag.get(name, 0)
            fill = LAGGING_FILL if behind else TOPIC_FILL
            sub = f"lag {behind}"
            href, rx, css = f"/topics/{quote(name)}", 2, "topic"
        else:
            run = last.get(name)
            status = run["status"] if run else "no run"
            fill = STATUS_FILL.get(status, NO_RUN_FILL)
            sub = status + (f" · out {run['rows_out']}" if run else "")
            href, rx, css = f"/runs?stage={quote(name)}", 14, "stage"
        parts.append(
            f'<a href="{escape(href)}" class="node {css}" data-name="{escape(name)}">'
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="{rx}" fill="{fill}" stroke="#667"/>'
            f'<text x="{x + NODE_W // 2}" y="{y + 18}" text-anchor="middle" font-size="13">{escape(_label(name))}</text>'
            f'<text x="{x + NODE_W // 2}" y="{y + 35}" text-anchor="middle" font-size="11" fill="#444">'
            f'{escape(sub)}</text></a>')
    parts.append("</svg>")
    return "".join(parts)


def _edge(x1: int, y1: int, x2: int, y2: int, *, lookup: bool = False) -> str:
    """A curve from (x1, y1) to (x2, y2) ending in an arrow; a lookup's is dashed."""
    mid = (x1 + x2) / 2
    dashed = ' class="edge lookup" stroke-dasharray="5 4"' if lookup else ' class="edge"'
    return (f'<path d="M {x1} {y1} C {mid} {y1}, {mid} {y2}, {x2} {y2}" fill="none" stroke="#667" '
            f'stroke-width="1.4"{dashed} marker-end="url(#arrow)"/>')


def bars(runs: list[dict], value: str, *, width: int = 320, height: int = 60) -> str:
    """A small bar chart (SVG) of ``value`` (``rows_out``, ``duration_s``...) over ``runs``, oldest
    first; each bar is a link to its run and coloured by its status."""
    if not runs:
        return ""
    top = max((r.get(value) or 0) for r in runs) or 1
    step = width / max(len(runs), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="bars" width="{width}" height="{height + 14}" '
             f'viewBox="0 0 {width} {height + 14}" role="img"><title>{escape(value)} per run</title>']
    for i, r in enumerate(runs):
        v = r.get(value) or 0
        h = max(1, round(v / top * height))
        fill = {"succeeded": "#5a9", "failed": "#c55", "partial": "#d93"}.get(r["status"], "#999")
        parts.append(f'<a href="/runs/{quote(r["run_id"])}"><rect x="{i * step + 1:.1f}" y="{height - h}" '
                     f'width="{max(step - 2, 1):.1f}" height="{h}" fill="{fill}"><title>{escape(r["run_id"])}: '
                     f'{escape(str(v))}</title></rect></a>')
    parts.append(f'<text x="0" y="{height + 12}" font-size="10" fill="#555">max {escape(f"{top:g}")}</text></svg>')
    return "".join(parts)
