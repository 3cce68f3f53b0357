"""Move the ledger's modules into rooms and point every import at the rooms' faces (issue 40).

Re-runnable and idempotent: run it on any tree (one where others added imports of the old
flat paths after the move, say) and it

1. ``git mv``s each module still at its old path ``minikafka/ledger/<old>.py`` to its room
   (``MOVES`` below), and makes a room's ``__init__.py`` if it has none;
2. rewrites every import of a ledger module in ``minikafka/``, ``tests/``, ``scripts/``,
   ``jobs/`` and ``docs/`` (absolute, relative, lazy ones inside functions, ``TYPE_CHECKING``
   ones): outside the ledger to the room's face (``minikafka.ledger.<room>``) when the face
   names what is imported (its ``__all__``), else to the room's module; inside the ledger to
   the room's module, relative, with the depth a module inside a room needs (an import written
   for the old flat place, e.g. ``from ..errors import X`` merged into a moved file, is read
   from the old place and written again);
3. rewrites dotted and path spellings in any text: ``"minikafka.ledger.acks.lag"`` (monkeypatch
   and mock targets, ``importlib``), ``ledger/acks.py``, ````ledger.acks````;
4. sorts the imports of the files it changed (``ruff check --fix --select I``, when ruff is there).

Merging a branch written against the flat ledger (what was done for main at 8056e53): where
``git merge`` conflicts in import blocks, take the other branch's side (old paths), ``git add``,
run this script, then ``ruff check``: an import line this branch had moved and the merge dropped
shows as an undefined name (F821), put it back; a new module at the ledger's top level is
reported below, give it a room in ``ROOMS``; an import the script marks as named by no face
goes into that face's ``__all__``.

Run from anywhere: ``python scripts/dev/ledger_rooms.py`` (``--dry-run``: list the files it would
change). A second run changes nothing. A module found at the ledger's top level that is not in
``MOVES`` is reported: give it a room here and run again.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LEDGER = REPO / "minikafka" / "ledger"

# room -> {old module name: new module name}, lowest room first (a room imports only rooms below it)
ROOMS: dict[str, dict[str, str]] = {
    "topics": {m: m for m in (
        "identifiers", "columns", "keys", "status", "counts", "acks", "layout", "catalog", "bulk", "table",
        "rowfiles", "arrow", "filters", "browse", "keyed", "evolution")},
    "consuming": {m: m for m in (
        "consumers", "groups", "queues", "schedules", "windows", "deliveries", "notifications", "quarantine",
        "runlog", "runlog_retention", "retention", "loads", "vitals", "metrics_read", "lineage_log")},
    "transactions": {**{m: m for m in (
        "connection", "schema", "upgrade", "filecheck", "identity", "commit", "group_commit", "events",
        "watcher")},
        "snapshot": "read_transaction"},
    "files": {**{m: m for m in (
        "backups", "snapshots", "filecopy", "walfold", "litestream", "maintenance_runs")},
        "restore": "restoring"},
    "lake": {m: m for m in ("state", "rows", "delta", "parquet", "iceberg")},
}
MOVES: dict[str, tuple[str, str]] = {old: (room, new) for room, mods in ROOMS.items() for old, new in mods.items()}

FOLDERS = ("minikafka", "tests", "scripts", "jobs", "docs")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".txt", ".html", ".cfg", ".ini"}
LINE_LENGTH = 120

_OLD = "|".join(sorted(MOVES, key=len, reverse=True))
DOTTED = re.compile(rf"\bminikafka\.ledger\.({_OLD})\b")
PATH = re.compile(rf"(?<![\w/])((?:minikafka/)?ledger/)({_OLD})\.py\b")
QUOTED = re.compile(rf"(?<=`)ledger\.({_OLD})\b")
# an import the AST does not see: in a string (a child process's code), in a page's code block
_ALIAS = r"[A-Za-z_]\w*(?:[ \t]+as[ \t]+[A-Za-z_]\w*)?"
TEXT_IMPORT = re.compile(rf"^(?P<head>.*?)\bfrom minikafka\.ledger import (?P<names>{_ALIAS}(?:[ \t]*,[ \t]*{_ALIAS})*)",
                         re.MULTILINE)


def new_module(old: str) -> str:
    room, new = MOVES[old]
    return f"minikafka.ledger.{room}.{new}"


# -- the tree ----------------------------------------------------------------------------------

def module_path(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_INIT_NAMES: dict[Path, set[str]] = {}


def names_defined_in(path: Path) -> set[str]:
    if path not in _INIT_NAMES:
        names: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        _INIT_NAMES[path] = names
    return _INIT_NAMES[path]


def face_names(room: str) -> set[str]:
    """The names a room's face lists in ``__all__``."""
    init = LEDGER / room / "__init__.py"
    if not init.is_file():
        return set()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return set()


def dotted_of(path: Path) -> list[str]:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def package_of(path: Path) -> list[str]:
    parts = dotted_of(path)
    return parts if path.name == "__init__.py" else parts[:-1]


def in_ledger(path: Path) -> bool:
    return LEDGER in path.parents


def moved_here(path: Path) -> bool:
    """A module inside a room (it may hold imports written for the ledger's old flat folder)."""
    return path.parent.parent == LEDGER and path.parent.name in ROOMS and path.name != "__init__.py"


# -- step 1: the moves -------------------------------------------------------------------------

ROOM_DOC = '"""{room}: the ledger room (issue 40); its face is written by hand."""\n\n__all__: list[str] = []\n'


def move_modules(dry_run: bool) -> list[str]:
    done = []
    for old, (room, new) in MOVES.items():
        src, dst = LEDGER / f"{old}.py", LEDGER / room / f"{new}.py"
        if not src.exists():
            continue
        if dst.exists():
            print(f"!! both {src.relative_to(REPO)} and {dst.relative_to(REPO)} exist: merge them by hand",
                  file=sys.stderr)
            continue
        done.append(f"{src.relative_to(REPO)} -> {dst.relative_to(REPO)}")
        if dry_run:
            continue
        dst.parent.mkdir(exist_ok=True)
        init = dst.parent / "__init__.py"
        if not init.exists():
            init.write_text(ROOM_DOC.format(room=room), encoding="utf-8")
            subprocess.run(["git", "add", str(init)], cwd=REPO, check=True)
        subprocess.run(["git", "mv", str(src), str(dst)], cwd=REPO, check=True)
    for path in sorted(LEDGER.glob("*.py")):
        if path.name != "__init__.py":
            print(f"!! {path.relative_to(REPO)} has no room: add it to ROOMS in {Path(__file__).name}",
                  file=sys.stderr)
    return done


# -- step 2: the imports -----------------------------------------------------------------------

def resolve(level: int, module: str | None, package: list[str]) -> str:
    if not level:
        return module or ""
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def resolvable(target: str, node: ast.ImportFrom) -> bool:
    """Does ``from <target> import <names>`` name a module (or, for ``from . import``, names) that exists?"""
    found = module_path(target)
    if found is None:
        return False
    if node.module is not None:
        return True
    for alias in node.names:
        if module_path(f"{target}.{alias.name}"):
            continue
        if alias.name not in MOVES and found.name == "__init__.py" and alias.name in names_defined_in(found):
            continue
        return False  # e.g. an old ledger module's name, no module here: read it from the old place
    return True


def express(target: str, package: list[str], relative: bool) -> str:
    """``target`` written relative to ``package`` (if ``relative``) or absolute."""
    if not relative:
        return target
    parts = target.split(".")
    common = 0
    while common < min(len(parts), len(package)) and parts[common] == package[common]:
        common += 1
    return "." * (len(package) - common + 1) + ".".join(parts[common:])


def mapped(target: str, alias: ast.alias, outside: bool) -> tuple[str, str, str | None]:
    """(module to import from, name, as-name) for one imported name, in the rooms' world."""
    name, asname = alias.name, alias.asname
    parts = target.split(".")
    if target == "minikafka.ledger" and name in MOVES:
        room, new = MOVES[name]
        if new != name and asname is None:
            asname = name
        return f"minikafka.ledger.{room}", new, asname
    if parts[:2] == ["minikafka", "ledger"] and len(parts) == 3 and parts[2] in MOVES:
        room, _ = MOVES[parts[2]]
        if outside and name in face_names(room):
            return f"minikafka.ledger.{room}", name, asname
        return new_module(parts[2]), name, asname
    if parts[:2] == ["minikafka", "ledger"] and len(parts) == 4 and parts[2] in ROOMS and outside:
        if name in face_names(parts[2]):
            return f"minikafka.ledger.{parts[2]}", name, asname
    return target, name, asname


def render(module: str, aliases: list[tuple[str, str | None]], indent: str) -> str:
    names = [f"{n} as {a}" if a and a != n else n for n, a in aliases]
    line = f"from {module} import {', '.join(names)}"
    if len(indent) + len(line) <= LINE_LENGTH:
        return line
    inner = "".join(f"{indent}    {n},\n" for n in names)
    return f"from {module} import (\n{inner}{indent})"


def rewrite_imports(path: Path, text: str) -> str:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        print(f"!! {path.relative_to(REPO)}: not parsed ({exc}); left as it is", file=sys.stderr)
        return text
    outside = not in_ledger(path)
    package = package_of(path)
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        target = resolve(node.level, node.module, package)
        if node.level and moved_here(path) and not resolvable(target, node):
            old_place = resolve(node.level, node.module, package[:-1])
            if resolvable(old_place, node) or old_place.startswith("minikafka.ledger"):
                target = old_place
        if not target.startswith("minikafka"):
            continue
        groups: dict[str, list[tuple[str, str | None]]] = {}
        for alias in node.names:
            module, name, asname = mapped(target, alias, outside)
            groups.setdefault(module, []).append((name, asname))
            parts = module.split(".")
            if outside and path.is_relative_to(REPO / "minikafka") and parts[:2] == ["minikafka", "ledger"] and (
                    len(parts) != 3 or name not in face_names(parts[2])):
                print(f"!! {path.relative_to(REPO)}:{node.lineno} imports {name} from {module}: not a name of a "
                      f"room's face; add it to that face's __all__ (then run again) or use what the face names",
                      file=sys.stderr)
        relative = bool(node.level) and path.is_relative_to(REPO / "minikafka")
        original = ast.get_source_segment(text, node)
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        statements = [render(express(m, package, relative), a, indent) for m, a in groups.items()]
        same = (len(groups) == 1 and express(next(iter(groups)), package, relative) ==
                ("." * node.level + (node.module or "")) and
                [(a.name, a.asname) for a in node.names] == next(iter(groups.values())))
        if same:
            continue
        prefix = first.encode()[: node.col_offset].decode()
        joiner = "\n" + indent if not prefix.strip() else "; "
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset,
                      joiner.join(statements), original))
    for lineno, col, end_lineno, end_col, new, _ in sorted(edits, reverse=True):
        head = lines[lineno - 1].encode()[:col].decode()
        tail = lines[end_lineno - 1].encode()[end_col:].decode()
        lines[lineno - 1: end_lineno] = [head + new + tail]
    return "".join(lines)


# -- step 3: dotted names and paths in any text ------------------------------------------------

def _text_import(match: re.Match) -> str:
    head, groups = match["head"], {}
    for alias in match["names"].split(","):
        name, _, asname = (part.strip() for part in alias.partition(" as "))
        module, name, asname = mapped("minikafka.ledger", ast.alias(name, asname or None), True)
        groups.setdefault(module, []).append(f"{name} as {asname}" if asname and asname != name else name)
    statements = [f"from {module} import {', '.join(names)}" for module, names in groups.items()]
    return head + (f"\n{head}" if not head.strip() else "; ").join(statements)


def rewrite_text(text: str) -> str:
    text = TEXT_IMPORT.sub(_text_import, text)
    text = DOTTED.sub(lambda m: new_module(m.group(1)), text)
    text = PATH.sub(lambda m: f"{m.group(1)}{MOVES[m.group(2)][0]}/{MOVES[m.group(2)][1]}.py", text)
    return QUOTED.sub(lambda m: new_module(m.group(1)).removeprefix("minikafka."), text)


def files() -> list[Path]:
    out = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                out.append(path)
    if Path(__file__).resolve() in out:
        out.remove(Path(__file__).resolve())  # this script spells the old paths on purpose
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="list what would change, change nothing")
    args = parser.parse_args(argv)
    for line in move_modules(args.dry_run):
        print("moved", line)
    changed = []
    for path in files():
        text = path.read_text(encoding="utf-8")
        new = rewrite_text(rewrite_imports(path, text) if path.suffix == ".py" else text)
        if new != text:
            changed.append(path)
            if not args.dry_run:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print("rewrote", path.relative_to(REPO))
    ruff = shutil.which("ruff") or shutil.which("ruff", path=str(Path(sys.executable).parent))
    python_files = [str(p) for p in changed if p.suffix == ".py"]
    if python_files and not args.dry_run:
        if ruff:
            subprocess.run([ruff, "check", "--quiet", "--fix", "--select", "I", *python_files], cwd=REPO)
        else:
            print("ruff not found: sort the imports of the files above (ruff check --fix --select I)")
    print(f"{len(changed)} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
