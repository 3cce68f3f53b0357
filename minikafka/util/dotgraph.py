"""A pipeline DAG as Graphviz DOT text, and as an image drawn by Graphviz's ``dot``.

Nodes are the topics, named by their quoted names (DOT's quoted ids take any text, so
``a.b``, ``a_b`` and ``a-b`` are three nodes); edges carry the stage names. ``dot`` is
Debian's ``graphviz`` package (scripts/setup.sh installs it); without it, rendering
raises ``MissingDependencyError`` naming the package.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..errors import MissingDependencyError, RenderError
from .mermaid import edge_labels

IMAGE_FORMATS = ("svg", "png", "pdf")


def quoted(text: str) -> str:
    """``text`` as a DOT quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(edges: list[tuple[str, str | None]], counts: dict[str, tuple[int, int]] | None = None,
           stages: list[str | None] | None = None, title: str | None = None,
           dashed: set[tuple[str, str]] | None = None) -> str:
    """DOT text of the graph (see ``mermaid.render`` for the arguments)."""
    lines = ["digraph pipeline {", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10, color="#555555"];']
    if title:
        lines.append(f'  label={quoted(title)}; labelloc=t; fontname="Helvetica";')
    names: list[str] = []
    for src, dst in edges:
        for n in (src, dst):
            if n is not None and n not in names:
                names.append(n)
    for n in names:
        label = n if counts is None else f"{n}\nnew: {counts.get(n, (0, 0))[0]} | handled: {counts.get(n, (0, 0))[1]}"
        lines.append(f"  {quoted(n)} [label={quoted(label)}];")
    labels = edge_labels(edges, stages)
    seen = set()
    for src, dst in edges:
        if dst is None or (src, dst) in seen:
            continue
        seen.add((src, dst))
        attrs = [f"label={quoted(labels[src, dst])}"] if (src, dst) in labels else []
        if dashed and (src, dst) in dashed:  # a lookup: read whole, never acked
            attrs.append("style=dashed")
        attrs = f" [{', '.join(attrs)}]" if attrs else ""
        lines.append(f"  {quoted(src)} -> {quoted(dst)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_program() -> str:
    """The path of Graphviz's ``dot``.

    Raises:
        MissingDependencyError: it is not installed (names the Debian package).
    """
    found = shutil.which("dot")
    if found is None:
        raise MissingDependencyError(
            "Graphviz's 'dot' is not installed: apt-get install graphviz (scripts/setup.sh does), "
            "or print the Mermaid text instead")
    return found


def render_image(dot_text: str, fmt: str, *, timeout: float = 60.0) -> bytes:
    """The image ``dot`` draws of ``dot_text``, as bytes of ``fmt`` (svg, png, pdf).

    Raises:
        MissingDependencyError: no ``dot``.
        RenderError: ``dot`` failed (its message), or ``fmt`` is not an image format.
    """
    if fmt not in IMAGE_FORMATS:
        raise RenderError(f"cannot draw {fmt!r}: use one of {', '.join(IMAGE_FORMATS)}")
    program = dot_program()
    try:
        done = subprocess.run([program, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RenderError(f"Graphviz's dot did not run: {exc}") from exc
    if done.returncode != 0 or not done.stdout:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit code {done.returncode}"
        raise RenderError(f"Graphviz's dot failed: {message}")
    return done.stdout


def format_of(path: str | Path) -> str:
    """What a ``plot --output`` file holds, from its suffix: svg, png, pdf, dot (DOT text)
    or mermaid (``.mmd``, ``.mermaid``, ``.md``).

    Raises:
        RenderError: another suffix (the message lists the known ones).
    """
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in IMAGE_FORMATS or suffix == "dot":
        return suffix
    if suffix in ("gv",):
        return "dot"
    if suffix in ("mmd", "mermaid", "md"):
        return "mermaid"
    raise RenderError(f"{path}: cannot tell the format from the suffix {('.' + suffix) if suffix else '(none)'}: "
                      "use .svg, .png, .pdf, .dot or .mmd")
