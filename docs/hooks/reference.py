"""The reference pages' generated text, made from the code and committed into the pages.

A page holds a block ``<!-- generated: NAME -->`` ... ``<!-- end of generated: NAME -->``;
``python scripts/dev/gen_reference.py`` fills it (``render``) with:

- ``cli``: every ``minikafka`` command with its ``--help`` text, from the click command tree;
- ``pipeline-file``: the pipeline TOML format, from ``minikafka.pipelines.schema`` (one table per
  section: key, type, required, what it expects) and the annotated example in
  ``minikafka.pipelines.definition``;
- ``deliveries-file``: the deliveries TOML format, from ``minikafka.connectors.delivery``;
- ``quality-suite``: the expectation suite TOML format, from ``minikafka.quality.suite``;
- ``errors``: the error classes ``minikafka`` exports;
- ``python-api``: the public API (``API_SECTIONS``), each object's signature and docstring;
- ``layout``: the code layout, one table a layer (lowest first, as ``tests/test_layers.py`` orders
  them), each folder and module with the first paragraph of its docstring.

The text is committed, so a page reads on the forge as on the site, and ``mkdocs build`` (this
file is its hook) imports nothing of the project: it only refuses a block left unfilled.
``tests/docs/test_reference_pages.py`` fails when a committed block is stale. A marker the
generators do not know is an error, so a typo cannot ship an empty page.
"""

from __future__ import annotations

import dataclasses
import inspect
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


# -- the Python API ------------------------------------------------------------------------

API_SECTIONS = [
    ("The ledger", "minikafka", ["Source", "Topic", "KeyedTable", "Record", "Transaction"]),
    ("Row-level pipelines", "minikafka", ["Pipeline", "FullPipeline"]),
    ("Consumer groups, queues, notifications", "minikafka", ["ConsumerGroup", "Queue", "Job", "Notification",
                                                             "Listener"]),
    ("Streams and windows", "minikafka", ["Stream", "StreamingConsumer", "Window", "WindowEmitter", "CountWindow",
                                          "RelaxedTimeWindow", "FixedTimeWindow"]),
    ("Events and runs", "minikafka", ["Event", "RunResult"]),
    ("The Spark engine", "minikafka.spark", ["build_session", "Stage", "StageContext", "run_stage", "read_topic",
                                            "StageFailed"]),
    # the pytest fixtures (minikafka_pipeline, minikafka_ledger, minikafka_spark, minikafka_engine_url) live in
    # minikafka.testing.plugin: docs/how-to/testing-your-stages.md
    ("Testing your stages", "minikafka.testing", ["StageHarness", "StageResult"]),
]
DOC_SECTIONS = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Yields|Raises|Example|Examples|Attributes|"
                          r"Note|Notes|Warning|Warns)\s*:\s*$")


class _Annotation:
    """An annotation string shown as written (``inspect`` would quote it)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _signature(fn, name: str, *, drop_self: bool = False) -> str:
    """``name(params) -> return`` with annotations as written; one parameter a line when long."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return f"{name}(...)"

    def ann(value):
        return value if value is inspect.Parameter.empty else _Annotation(str(value) if isinstance(value, str)
                                                                             else inspect.formatannotation(value))

    params = [p.replace(annotation=ann(p.annotation)) for p in sig.parameters.values()]
    if drop_self and params and params[0].name in ("self", "cls"):
        params = params[1:]
    sig = sig.replace(parameters=params, return_annotation=ann(sig.return_annotation))
    text = f"{name}{sig}"
    if len(text) <= HELP_WIDTH:
        return text
    shown = str(sig.replace(return_annotation=inspect.Signature.empty))[1:-1]
    parts, depth, current = [], 0, ""
    for ch in shown:  # split on the commas between parameters, not inside brackets
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    ret = "" if sig.return_annotation is inspect.Signature.empty else f" -> {sig.return_annotation!r}"
    return f"{name}(\n" + "".join(f"    {p},\n" for p in parts if p) + f"){ret}"


def _escape_text(line: str) -> str:
    """A prose line for markdown: RST ``code`` as `code`; ``<`` and ``*`` outside code escaped."""
    line = line.replace("``", "`")
    pieces = line.split("`")
    for i in range(0, len(pieces), 2):  # outside code spans
        pieces[i] = pieces[i].replace("<", "&lt;").replace("*", "\\*")
    return "`".join(pieces)


def _doc_markdown(doc: str) -> str:
    """A Google-style docstring as markdown: sections as bold titles with lists, ``::`` blocks fenced."""
    lines = doc.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        section = DOC_SECTIONS.match(line)
        block_follows = line.rstrip().endswith("::")
        if section or block_follows:
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                body.append(lines[i])
                i += 1
            text = textwrap.dedent("\n".join(body)).strip("\n")
            if block_follows:
                intro = line.rstrip()[:-1].rstrip()
                if intro:
                    out.append(_escape_text(intro + ":") + "\n")
                out.append("```text\n" + text + "\n```\n")
                continue
            out.append(f"**{section.group(1)}:**\n")
            if section.group(1) in ("Example", "Examples"):
                out.append("```text\n" + text + "\n```\n")
                continue
            if section.group(1) in ("Returns", "Return", "Yields"):  # free text, not a list of names
                out.append(" ".join(_escape_text(t.strip()) for t in text.splitlines() if t.strip()) + "\n")
                continue
            entries: list[str] = []
            for entry in text.splitlines():
                if entry and not entry.startswith((" ", "\t")) or not entries:
                    entries.append(entry.strip())
                elif entry.strip():
                    entries[-1] += " " + entry.strip()
            for entry in entries:
                head, sep, rest = entry.partition(":")
                if sep and re.fullmatch(r"[\w.*]+( \(.*\))?", head.strip()):
                    out.append(f"- `{head.strip()}`: {_escape_text(rest.strip())}")
                else:
                    out.append(f"- {_escape_text(entry)}")
            out.append("")
            continue
        out.append(_escape_text(line))
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _members(cls) -> list[tuple[str, object]]:
    """The public methods and properties a class defines itself, in source order."""
    fields = getattr(cls, "__dataclass_fields__", {})
    out = []
    for name, value in cls.__dict__.items():
        if name.startswith("_") or name in fields:
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            out.append((name, value))
    return out


def _api_object(module: str, name: str) -> str:
    import importlib

    obj = getattr(importlib.import_module(module), name)
    anchor = f"{module}.{name}"
    out = [f"### {name} {{ #{anchor} }}\n"]
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        init = obj.__dict__.get("__init__") or (obj if dataclasses.is_dataclass(obj) else None)
        shown = _signature(init, name, drop_self=True) if init is not None else f"{name}(...)"
        out.append(f"```text\n{kind} {shown}\n```\n")
    else:
        out.append(f"```text\n{_signature(obj, name)}\n```\n")
    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj) and "__init__" in obj.__dict__ and obj.__dict__["__init__"].__doc__:
        doc = doc + "\n\n" + inspect.cleandoc(obj.__dict__["__init__"].__doc__)
    if doc:
        out.append(_doc_markdown(doc))
    if inspect.isclass(obj):
        for member, value in _members(obj):
            out.append(f"#### {name}.{member} {{ #{anchor}.{member} }}\n")
            if isinstance(value, property):
                out.append(f"```text\nproperty {member}\n```\n")
                fdoc = inspect.getdoc(value)
            else:
                out.append(f"```text\n{_signature(value, member, drop_self=True)}\n```\n")
                fdoc = inspect.getdoc(value)
            if fdoc:
                out.append(_doc_markdown(fdoc))
    return "\n".join(out)


def python_api() -> str:
    out = []
    for title, module, names in API_SECTIONS:
        out.append(f"## {title}\n")
        out += [_api_object(module, name) for name in names]
    return "\n".join(out)


GENERATORS = {"errors": errors, "cli": cli_reference, "pipeline-file": pipeline_file, "deliveries-file": deliveries_file,
              "quality-suite": quality_suite, "layout": code_layout, "python-api": python_api}

# a filled block: the start marker, the generated text, the end marker (a bare start marker: not filled yet)
REGENERATE = "python scripts/dev/gen_reference.py"
BLOCK = re.compile(r"<!--\s*generated:\s*([a-z-]+)\s*-->\n(?:.*?<!--\s*end of generated:\s*\1\s*-->\n?)?", re.S)


def render(markdown: str) -> str:
    """Fill every ``<!-- generated: NAME -->`` block with what the code declares now (an unknown NAME
    raises KeyError); the markers stay, so the page can be regenerated again."""
    def fill(m: re.Match) -> str:
        name = m.group(1)
        text = GENERATORS[name]().rstrip("\n")
        return (f"<!-- generated: {name} -->\n<!-- regenerate with: {REGENERATE} -->\n\n{text}\n\n"
                f"<!-- end of generated: {name} -->\n")

    return BLOCK.sub(fill, markdown)


def pages(root: Path = ROOT) -> list[Path]:
    """The pages holding a generated block."""
    return sorted(p for p in (root / "docs").rglob("*.md") if MARKER.search(p.read_text(encoding="utf-8")))


def stale_pages(root: Path = ROOT) -> list[Path]:
    """The pages whose committed text differs from what the code generates now."""
    return [p for p in pages(root) if render(p.read_text(encoding="utf-8")) != p.read_text(encoding="utf-8")]


def write_pages(root: Path = ROOT) -> list[Path]:
    """Regenerate every page's blocks in place; the pages that changed."""
    changed = []
    for page in pages(root):
        old = page.read_text(encoding="utf-8")
        new = render(old)
        if new != old:
            page.write_text(new, encoding="utf-8")
            changed.append(page)
    return changed


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 - mkdocs hook signature
    """The committed text is the page: nothing is imported at build time (no PYTHONPATH needed).
    A block left unfilled stops the build, naming the command that fills it."""
    for m in MARKER.finditer(markdown):
        end = f"<!-- end of generated: {m.group(1)} -->"
        if end not in markdown[m.end():]:
            raise ValueError(f"{page.file.src_path}: the generated block {m.group(1)!r} is not filled: run {REGENERATE}")
    return FRAME.sub("", markdown)  # the markers are for the generator, not the reader


FRAME = re.compile(r"^<!--\s*(?:generated:|end of generated:|regenerate with:)[^>]*-->\n", re.M)
