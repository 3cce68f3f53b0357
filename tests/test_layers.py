"""The package's folders are layers: imports point down, and there is no import circle.

Function-level (lazy) imports count; ``if TYPE_CHECKING:`` imports are not run and do not,
except inside ``api/``, whose rooms (core < modes < face) hold for type hints too. A module
named in a string (a preload list, ``python -m minikafka...``, a worker's imports) is a
dependency as well, and points down like an import (it may point back: a process started by
name is not an import circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minikafka"

# lowest first; a module may import its own layer and the layers below it
LAYERS = ["errors", "util", "ledger", "observe", "api", "connectors", "quality", "spark", "pipelines", "testing", "console", "cli", "root"]


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    head = parts[1]
    if head in LAYERS:
        return head
    return "root"  # modules at the package root (job.py): the public face


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for sub in ast.walk(child):
                    if hasattr(sub, "lineno"):
                        lines.add(sub.lineno)
    return lines


def imports_of(path: Path, modules: set[str], *, type_only: bool = False, strings: bool = False) -> set[str]:
    """The package modules ``path`` imports (``type_only``: ``if TYPE_CHECKING:`` ones too;
    ``strings``: and the ones a string names, exactly: ``"minikafka.job"``)."""
    tree = ast.parse(path.read_text())
    skip = set() if type_only else _type_checking_lines(tree)
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("minikafka"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("minikafka"):
                    found.add(alias.name)
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules \
                and node.value != "minikafka":  # the bare name is the logger's and the distribution's
            found.add(node.value)
    found.discard(name)
    return {m for m in found if m in modules}


def graph(*, strings: bool = False) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {m: imports_of(p, modules, strings=strings) for m, p in paths.items()}


def test_module_names_written_as_strings_count_as_dependencies():
    g = graph(strings=True)
    assert "minikafka.spark.stages.rowfn" in g["minikafka.pipelines.launch.stage_sessions"]
    assert "minikafka.pipelines.launch.engine_main" in g["minikafka.pipelines.launch.engine"]
    assert "minikafka.pipelines.launch.call" in g["minikafka.pipelines.launch.stagehost"]


def test_imports_point_down_the_layers():
    wrong = []
    for module, targets in graph(strings=True).items():
        mine = LAYERS.index(layer_of(module))
        for target in targets:
            if LAYERS.index(layer_of(target)) > mine:
                wrong.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert not wrong, "imports pointing up a layer:\n" + "\n".join(sorted(wrong))


def test_the_import_graph_has_no_circle():
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(g[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)


def test_the_package_root_holds_only_the_public_face():
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root_modules) <= 8, root_modules


def test_every_folder_is_a_known_layer():
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert set(folders) <= set(LAYERS), folders


# -- inside api/: core < modes < face ---------------------------------------------------------
# core (api/core/: topic rows, records, transactions, notifications, engines, the handles the
# modes type against) < modes (api/modes/: pipes, queues and workers, groups, streaming,
# windows, attach, retention) < face (api/source.py, api/topic.py, api/streams.py). Type-only
# imports count here: a mode types its arguments with ``core.handles``, never with the face.
API_ROOMS = ["core", "modes", "face"]
# The one circle the face keeps, because minikafka's API has it: ``Topic.source`` is the
# Source that made the topic (topic.py names Source for that type only), and ``Source.topic()``
# makes Topics (source.py imports topic.py).
FACADE_PAIR = {("minikafka.api.topic", "minikafka.api.source")}


def api_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["minikafka", "api"]:
        return None
    if len(parts) > 2 and parts[2] in ("core", "modes"):
        return parts[2]
    return "face"


def api_graph() -> dict[str, set[str]]:
    """The import graph of api/ with type-only imports counted."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {m: {t for t in imports_of(p, modules, type_only=True) if api_room(t)}
            for m, p in paths.items() if api_room(m)}


def test_api_rooms_import_down_core_then_modes_then_face_type_hints_included():
    wrong = []
    for module, targets in api_graph().items():
        mine = API_ROOMS.index(api_room(module))
        for target in targets:
            if API_ROOMS.index(api_room(target)) > mine:
                wrong.append(f"{module} ({api_room(module)}) imports {target} ({api_room(target)})")
    assert not wrong, "api/ imports pointing up a room (core < modes < face):\n" + "\n".join(sorted(wrong))


def test_api_has_no_import_circle_but_the_facade_pair_type_hints_included():
    g = {m: {t for t in targets if (m, t) not in FACADE_PAIR} for m, targets in api_graph().items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(g[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                pytest.fail("import circle in api/: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)


def test_the_api_face_is_source_topic_and_streams():
    face = sorted(p.name for p in (PACKAGE / "api").glob("*.py"))
    assert face == ["__init__.py", "source.py", "streams.py", "table.py", "topic.py"], face


def test_every_exception_lives_in_errors_py_and_is_exported():
    import minikafka
    from minikafka import errors

    outside = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(b) for b in node.bases}
                if any(b.endswith(("Error", "Exception", "Failed")) or b == "MinikafkaError" for b in bases):
                    outside.append(f"{module_name(path)}.{node.name}")
    outside = [c for c in outside if not c.startswith("minikafka.cli.")]  # click's own exception types
    assert not outside, "exception classes outside errors.py: " + ", ".join(sorted(outside))
    defined = [n for n, v in vars(errors).items()
               if isinstance(v, type) and issubclass(v, BaseException) and v.__module__ == "minikafka.errors"]
    assert not set(defined) - set(minikafka.__all__), sorted(set(defined) - set(minikafka.__all__))


def test_every_import_from_the_package_names_something_that_exists():
    """Lazy imports run only on their path: check each names a module or attribute that exists."""
    import importlib

    missing = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("minikafka"):
                continue
            module = importlib.import_module(target)
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    try:
                        importlib.import_module(f"{target}.{alias.name}")
                    except ImportError:
                        missing.append(f"{name}:{node.lineno} imports {alias.name} from {target}")
    assert not missing, "\n".join(missing)


# -- inside spark/: two wings beside what both share --------------------------------------------
# spark/stages/ (a stage over the ledger) and spark/loading/ (backfill) each import the shared
# modules (spark/session.py, staging.py, types.py) and the layers below, never the other wing;
# the shared modules import neither wing. The package's __init__ is the face and may name both.
SPARK_WINGS = ("stages", "loading")


def spark_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["minikafka", "spark"] or module == "minikafka.spark":
        return None
    return parts[2] if parts[2] in SPARK_WINGS else "shared"


def test_spark_wings_import_the_shared_modules_never_each_other():
    wrong = []
    for module, targets in graph().items():
        mine = spark_room(module)
        if mine is None:
            continue
        for target in targets:
            theirs = spark_room(target)
            if theirs in SPARK_WINGS and theirs != mine:
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert not wrong, "spark/ wings import only what both share:\n" + "\n".join(sorted(wrong))


def test_spark_holds_two_wings_and_the_shared_modules():
    spark = PACKAGE / "spark"
    wings = sorted(p.name for p in spark.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    shared = sorted(p.name for p in spark.glob("*.py"))
    assert wings == sorted(SPARK_WINGS), wings
    assert shared == ["__init__.py", "engine.py", "engines.py", "session.py", "staging.py", "types.py"], shared


def test_the_public_names_are_listed_sorted_and_no_module_holds_three_blank_lines_in_a_row():
    import minikafka

    assert minikafka.__all__ == sorted(minikafka.__all__, key=lambda n: (n.lower(), n))
    runs = [str(p.relative_to(PACKAGE.parent)) for p in sorted(PACKAGE.rglob("*.py")) if "\n\n\n\n" in p.read_text()]
    assert not runs, runs


# -- inside pipelines/: what a run is < how a stage starts < what runs next --------------------
# dagster's split: the scheduler (runner.py, watch.py) decides what runs next and never knows how a
# stage starts; the launch room (pipelines/launch/: one launcher per mode, the StageCall contract,
# the engine, the stage host, the per-row sessions) knows how, and never imports the scheduler;
# both stand on the pipeline's plan (definition, schema, options, results, failures, the run's
# ledger questions). A stage's own process (minikafka.job) imports the launch room, no scheduler.
PIPELINE_ROOMS = ["plan", "launch", "scheduler"]
SCHEDULER = {"minikafka.pipelines.runner", "minikafka.pipelines.watch"}


def pipeline_room(module: str) -> str | None:
    if module in SCHEDULER:
        return "scheduler"
    if module.startswith("minikafka.pipelines.launch"):
        return "launch"
    if module == "minikafka.pipelines" or module.startswith("minikafka.pipelines."):
        return "plan"
    return None


def test_the_launch_room_sits_below_the_scheduler_strings_included():
    wrong = []
    for module, targets in graph(strings=True).items():
        mine = pipeline_room(module)
        if mine is None:
            continue
        for target in targets:
            theirs = pipeline_room(target)
            if theirs is not None and PIPELINE_ROOMS.index(theirs) > PIPELINE_ROOMS.index(mine):
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert not wrong, "pipelines/ imports pointing up a room (plan < launch < scheduler):\n" + "\n".join(sorted(wrong))


def test_a_stage_process_imports_no_scheduler():
    g = graph(strings=True)
    assert not g["minikafka.job"] & SCHEDULER
    assert "minikafka.pipelines.launch.call" in g["minikafka.job"]


def test_the_scheduler_starts_no_process_and_imports_no_spark():
    for module in sorted(SCHEDULER):
        tree = ast.parse((PACKAGE.parent / (module.replace(".", "/") + ".py")).read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in node.names} | {node.module or "" for node in ast.walk(tree)
                                             if isinstance(node, ast.ImportFrom)}
        assert not {n for n in names if n.split(".")[0] in ("subprocess", "pyspark") or ".spark" in f".{n}"}, module
    runner = PACKAGE / "pipelines" / "runner.py"
    assert len(runner.read_text().splitlines()) <= 300

# -- inside ledger/: four rooms, each with a face -------------------------------------------------
# topics/ (topic storage) < consuming/ (consumption state) < transactions/ (the open file, commits,
# wake-ups) < files/ (backups, snapshots, restore) < lake/ (Iceberg tables committed with the ledger). A room imports only the rooms below it. The
# layers above (every module outside ledger/, job.py included) import a room's face, its
# __init__, and only what its __all__ names, never a room's modules.
LEDGER_ROOMS = ["topics", "consuming", "transactions", "files", "lake"]
FACES = {f"minikafka.ledger.{room}" for room in LEDGER_ROOMS}


def ledger_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["minikafka", "ledger"] or len(parts) < 3:
        return None
    return parts[2]


def ledger_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names) of each import of a ledger module in ``path``, lazy ones included."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "minikafka.ledger" or target.startswith("minikafka.ledger."):
                found.append((node.lineno, target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("minikafka.ledger")]
    return found


def face_all(face: str) -> list[str]:
    import importlib

    return list(importlib.import_module(face).__all__)


def test_the_ledger_holds_four_rooms_and_nothing_beside_them_but_its_docstring():
    ledger = PACKAGE / "ledger"
    rooms = sorted(p.name for p in ledger.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert rooms == sorted(LEDGER_ROOMS), rooms
    assert sorted(p.name for p in ledger.glob("*.py")) == ["__init__.py"], "a module beside the rooms: give it one"
    assert not [n for n in ast.parse((ledger / "__init__.py").read_text()).body if not isinstance(n, ast.Expr)]


def test_ledger_rooms_import_only_the_rooms_below_them():
    wrong = []
    for module, targets in graph().items():
        mine = ledger_room(module)
        if mine is None:
            continue
        for target in targets:
            theirs = ledger_room(target)
            if theirs and theirs != mine and LEDGER_ROOMS.index(theirs) > LEDGER_ROOMS.index(mine):
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert not wrong, "ledger/ rooms import down (topics < consuming < transactions < files):\n" + \
        "\n".join(sorted(wrong))


def test_the_layers_above_import_the_ledger_only_through_the_rooms_faces():
    wrong, used = [], {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if ledger_room(module) or module == "minikafka.ledger":
            continue
        for line, target, names in ledger_imports(path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if target not in FACES:
                wrong.append(f"{where} imports {target} (not a room's face)")
                continue
            named = set(face_all(target))
            wrong += [f"{where} imports {n} from {target}, which its __all__ does not name"
                      for n in names if n not in named]
            used.setdefault(layer_of(module), set()).add(target)
    assert not wrong, "\n".join(wrong)
    # the count: each layer above imports at most the four faces (before the rooms: up to 22 modules)
    assert all(faces <= FACES for faces in used.values()), used
    assert set().union(*used.values()) == FACES, "a face no layer above uses: fold it into another room"


def test_each_face_names_what_it_holds_sorted_and_nothing_shadows_a_room_module():
    import importlib
    import types

    for face in sorted(FACES):
        names = face_all(face)
        assert names == sorted(names, key=lambda n: (n.lower(), n)), face
        package = importlib.import_module(face)
        room = PACKAGE / "ledger" / face.rsplit(".", 1)[1]
        modules = {p.stem for p in room.glob("*.py")} - {"__init__"}
        for name in names:
            value = getattr(package, name)  # raises if the face names what it does not hold
            if name in modules:
                assert isinstance(value, types.ModuleType) and value.__name__ == f"{face}.{name}", \
                    f"{face}.{name} is not the module {name}.py"


# Parameters of the public API kept for code written against minikafka, doing nothing here.
ACCEPTED_FOR_COMPATIBILITY = {"minikafka/api/streams.py streaming(keep)"}


def test_no_function_takes_a_parameter_only_to_delete_it():
    """A parameter a function ``del``s unread is accepted and does nothing (acks' ``materialise``
    and ``now``, browse's ``cache`` and ``layout`` were): drop it and its callers' arguments."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
            for stmt in node.body:
                if isinstance(stmt, ast.Delete):
                    dead = [t.id for t in stmt.targets if isinstance(t, ast.Name) and t.id in params]
                    found += [f"{path.relative_to(PACKAGE.parent)}:{stmt.lineno} {node.name}({d})" for d in dead
                              if f"{path.relative_to(PACKAGE.parent)} {node.name}({d})" not in ACCEPTED_FOR_COMPATIBILITY]
    assert not found, "parameters deleted unread:\n" + "\n".join(found)
