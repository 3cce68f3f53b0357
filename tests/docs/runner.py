"""Run the code blocks of a markdown page the way a reader would, in a scratch directory.

Blocks are fenced code blocks. ``python``, ``bash``/``sh`` and ``console`` blocks run; every other
language is text unless a directive saves it to a file. A directive is an HTML comment on the
line(s) just before the fence, invisible on the rendered page::

    <!-- run: continue; spark -->

- ``continue``: this block continues the previous one: same scratch directory, same Python
  namespace, same shell variables. Without it a block starts afresh: a new scratch directory
  holding copies of the shipped ``conf/``, ``schemas/``, ``jobs/``, ``examples/`` and ``scripts/``
  (nothing else: no ``data/``, which a fresh checkout does not have either), a new namespace,
  a new shell. ``run_page(..., checkout=...)`` starts each afresh in a new ``git clone``
  instead (tests/docs/test_fresh_clone.py).
- ``save: PATH``: write the block's text to PATH (relative to the scratch directory) instead of
  running it ("save this as ...").
- ``output``: the block is the output of the previous block that ran (so it continues it):
  each of its non-blank lines must appear in that output, in order (``...`` matches anything
  within a line).
- ``exit: N``: a shell block is expected to end with exit code N (default 0).
- ``raises: NAME``: a Python block is expected to raise an exception of that class name.
- ``twice``: run the block a second time in the same place (an example that must be re-runnable).
- ``spark``: the block needs Java and pyspark; the page's test carries the ``spark`` marker.
- ``skip: REASON``: not run (say why: it sets up a machine, or runs until stopped); the
  reason runs to the end of the comment and comes last.
- ``timeout: SECONDS``: for a slow block (default 300).

Python blocks run in this process (so Spark blocks reuse the test session's SparkSession);
shell blocks run with ``bash -e -o pipefail`` and the checkout's ``minikafka`` first on the path.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("conf", "schemas", "jobs", "examples", "scripts")
RUNNABLE = {"python", "py", "bash", "sh", "shell", "console"}
DIRECTIVE = re.compile(r"^\s*<!--\s*run:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)[^\n]*$")
KNOWN = {"continue", "save", "output", "exit", "raises", "twice", "spark", "skip", "timeout"}


def _minikafkas(key: str) -> bool:
    """minikafka's own variables, which the user's environment would not have; not the test's engine
    directory (conftest): an engine the examples start is the test's, never the user's."""
    return key.startswith("MINIKAFKA_") and key != "MINIKAFKA_ENGINE_DIR"


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        try:
            name = self.page.relative_to(ROOT)
        except ValueError:
            name = self.page
        return f"{name}:{self.line}"

    @property
    def runs(self) -> bool:
        """Executed (or saved, or checked as output) rather than shown only."""
        if "skip" in self.directives:
            return False
        return self.lang in RUNNABLE or "save" in self.directives or "output" in self.directives

    @property
    def spark(self) -> bool:
        return "spark" in self.directives


def parse_directives(text: str) -> dict[str, str]:
    """``continue; save: a.toml``; a ``skip:`` reason runs to the end of the comment (it may hold ``;``)."""
    out: dict[str, str] = {}
    head, sep, reason = text.partition("skip:")
    if sep:
        out["skip"] = reason.strip()
        text = head
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, _, value = part.partition(":")
        name = name.strip()
        if name not in KNOWN:
            raise ValueError(f"unknown directive {name!r} (known: {sorted(KNOWN)})")
        out[name] = value.strip()
    return out


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a page with the directives just above each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    pending: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        d = DIRECTIVE.match(line)
        if d:
            pending.update(parse_directives(d.group(1)))
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            blocks.append(Block(page, i + 1, lang, "\n".join(body) + "\n", pending))
            pending = {}
            i = j + 1
            continue
        if line.strip():
            if pending:
                raise ValueError(f"{page}:{i + 1}: a run: directive must come right before a code block")
        i += 1
    return blocks


class BlockFailed(AssertionError):
    pass


def _lines_in_order(expected: str, actual: str) -> str | None:
    """None when every non-blank expected line appears in ``actual`` in order, else the first missing one."""
    norm = [" ".join(x.split()) for x in actual.splitlines()]
    pos = 0
    for want in (" ".join(x.split()) for x in expected.splitlines()):
        if not want:
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
        while pos < len(norm) and not pattern.search(norm[pos]):
            pos += 1
        if pos == len(norm):
            return want
        pos += 1
    return None


class Session:
    """One scratch directory, one Python namespace, one set of shell variables.

    ``checkout``: a function making a new working directory that is a checkout of the
    repository (a ``git clone``); the session runs there, with that checkout's minikafka.
    """

    def __init__(self, base: Path, checkout: Callable[[Path], Path] | None = None):
        package = ROOT
        if checkout is None:
            self.dir = Path(tempfile.mkdtemp(prefix="doc-", dir=base))
            for name in SHIPPED:
                if (ROOT / name).is_dir():
                    shutil.copytree(ROOT / name, self.dir / name,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            self.dir = checkout(Path(tempfile.mkdtemp(prefix="clone-", dir=base)))
            package = self.dir
        # only the checkout's minikafka on PYTHONPATH: the scratch directory's own schemas/ and
        # jobs/ (or a reader's modules) are found from the working directory, as for a user
        self.pythonpath = self.dir.parent / "pythonpath"
        self.pythonpath.mkdir(exist_ok=True)
        link = self.pythonpath / "minikafka"
        if not link.exists():
            link.symlink_to(package / "minikafka")
        self.namespace: dict = {"__name__": "__main__"}
        self.envfile = self.dir.parent / f"{self.dir.name}.env"
        self.last_output = ""
        self.modules_before = set(sys.modules)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not _minikafkas(k) and k != "PYTHONPATH"}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = str(self.pythonpath)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def close(self) -> None:
        for name in set(sys.modules) - self.modules_before:
            module = sys.modules.get(name)
            origin = getattr(module, "__file__", None) or ""
            if origin.startswith(str(self.dir)):
                del sys.modules[name]

    # -- running ------------------------------------------------------------------------

    def run(self, block: Block) -> None:
        if "save" in block.directives:
            target = (self.dir / block.directives["save"]).resolve()
            if self.dir.resolve() not in target.parents:
                raise BlockFailed(f"{block.where}: save path {block.directives['save']!r} leaves the scratch directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            return
        if "output" in block.directives:
            missing = _lines_in_order(block.text, self.last_output)
            if missing is not None:
                raise BlockFailed(f"{block.where}: expected output line not found: {missing!r}\n"
                                  f"--- the previous block printed:\n{self.last_output}")
            return
        for _ in range(2 if "twice" in block.directives else 1):
            if block.lang in ("python", "py"):
                self._python(block)
            elif block.lang == "console":
                self._console(block)
            else:
                self._shell(block, block.text)

    def _python(self, block: Block) -> None:
        expected = block.directives.get("raises")
        out = io.StringIO()
        code = compile(block.text, block.where, "exec", dont_inherit=True)  # not our __future__ imports
        cwd = os.getcwd()
        sys.path.insert(0, str(self.dir))
        saved_env = {k: os.environ.pop(k) for k in list(os.environ) if _minikafkas(k)}
        try:
            os.chdir(self.dir)
            with contextlib.redirect_stdout(out):
                exec(code, self.namespace)  # noqa: S102 - running the documentation's own examples
        except BaseException as exc:  # noqa: BLE001 - reported with the block's place
            self.last_output = out.getvalue()
            if expected and type(exc).__name__ == expected:
                return
            raise BlockFailed(f"{block.where}: the block raised {type(exc).__name__}: {exc}\n"
                              f"{''.join(traceback.format_exception(exc)[-6:])}\n--- output:\n{out.getvalue()}") from exc
        finally:
            os.chdir(cwd)
            sys.path.remove(str(self.dir))
            os.environ.update(saved_env)
        self.last_output = out.getvalue()
        if expected:
            raise BlockFailed(f"{block.where}: expected {expected} to be raised; nothing was\n--- output:\n{self.last_output}")

    def _shell(self, block: Block, script: str, expected_exit: int | None = None) -> None:
        if expected_exit is None:
            expected_exit = int(block.directives.get("exit", "0") or 0)
        strict = "set -e -o pipefail" if expected_exit == 0 else "set -o pipefail"
        pwd_file = self.envfile.with_suffix(".pwd")
        prelude = (f"[ -f {self.envfile} ] && . {self.envfile}\n"
                   f"[ -f {pwd_file} ] && cd \"$(cat {pwd_file})\"\n"
                   f"trap 'export -p > {self.envfile}; pwd > {pwd_file}' EXIT\n{strict}\n")
        timeout = float(block.directives.get("timeout") or 300)
        try:
            proc = subprocess.run(["bash", "-c", prelude + script], cwd=self.dir, env=self.env(), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise BlockFailed(f"{block.where}: still running after {timeout:.0f} s\n--- output:\n{exc.output}") from exc
        self.last_output = proc.stdout
        if proc.returncode != expected_exit:
            raise BlockFailed(f"{block.where}: exit code {proc.returncode}, expected {expected_exit}\n"
                              f"--- script:\n{script}--- output:\n{proc.stdout}")

    def _console(self, block: Block) -> None:
        """``$ command`` lines run one by one; the lines after each are its expected output."""
        steps: list[tuple[str, list[str]]] = []
        for line in block.text.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        if not steps:
            raise BlockFailed(f"{block.where}: a console block needs '$ command' lines")
        for command, expected in steps:
            self._shell(block, command + "\n")
            missing = _lines_in_order("\n".join(expected), self.last_output)
            if missing is not None:
                raise BlockFailed(f"{block.where}: `{command}` did not print {missing!r}\n--- output:\n{self.last_output}")


def run_page(page: Path, base: Path, *, with_spark: bool, echo=None,
             checkout: Callable[[Path], Path] | None = None, leave_out_spark: bool = False) -> int:
    """Run every runnable block of ``page``; return how many ran. Spark blocks only ``with_spark``;
    with ``leave_out_spark`` they (and the blocks that continue them) are left out instead of
    failing. Each session starts in a new ``checkout(dir)`` when given."""
    session: Session | None = None
    ran = 0
    leaving_out = False
    try:
        for block in blocks_of(page):
            if not block.runs:
                continue
            follows = bool({"continue", "output"} & set(block.directives))
            if leave_out_spark and (block.spark or (leaving_out and follows)):
                leaving_out = True
                continue
            leaving_out = False
            if block.spark and not with_spark:
                raise BlockFailed(f"{block.where}: a spark block on a page tested without Spark")
            if "output" in block.directives and session is None:
                raise BlockFailed(f"{block.where}: an output block must follow a block that ran")
            if session is None or not ({"continue", "output"} & set(block.directives)):
                if session is not None:
                    session.close()
                session = Session(base, checkout)
            session.run(block)
            ran += 1
            if echo is not None and "output" not in block.directives and "save" not in block.directives:
                echo(f"--- {block.where}\n{session.last_output}")
    finally:
        if session is not None:
            session.close()
    return ran
