"""This user's warm engines: where each is recorded, which one a pipeline uses, what it holds.

One engine serves every pipeline of a user on one Spark master. A running engine is recorded
in the user's engine directory (``$MINIKAFKA_ENGINE_DIR``, else ``$XDG_CACHE_HOME/minikafka/
engines``, ``~/.cache/minikafka/engines``) as ``<master>-<key>.json``, the key made of its
master and the settings its JVM started with; ``run`` of any pipeline on that master finds it
there. What a pipeline's stages need of their own is per session (each stage is a Spark
Connect session of its own): the ``spark.sql.*`` settings of its ``[spark]`` table, its code
(shipped to the session, which the engine's Python workers import), its ledger (a JDBC URL
per read). What a session cannot change is fixed when the JVM starts (``is_fixed``: every
setting but the runtime ``spark.sql.*`` ones, e.g. ``spark.driver.memory``): a pipeline that
names one with another value than the running engine's gets an engine of its own, and the
reason is printed.

Beside the state file: ``.used`` (its time says when a run last used the engine; its text the
idle timeout that run asked for), ``.served/`` (one file per pipeline that used it), ``.log``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

from ..util.enginedir import ENGINE_DIR_ENV, engines_dir, none_running_line  # noqa: F401 (read without Spark)
from ..util.redact import redact_url
from .engine import STATIC_SQL, EngineState, fixed_settings, is_fixed, session_settings  # noqa: F401 (the split lives in engine)

HEARTBEAT_S = 5.0  # how often a run marks its engine used while stages run
# a run's idle timeout is at least this: the engine must not stop between two marks of a run
MIN_LEASE_TIMEOUT_S = 2 * HEARTBEAT_S


def _digest(text: str, n: int = 16) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def fingerprint(fixed: dict[str, str]) -> dict[str, str]:
    """Each fixed setting's value as a digest: a state file never holds a value (a secret key)."""
    return {k: _digest(v) for k, v in sorted(fixed.items())}


def _master_slug(master: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", redact_url(master)).strip("-")[:40] or "master"
    return f"{slug}-{_digest(master, 8)}"


def slot_path(master: str, fixed: dict[str, str]) -> Path:
    """The state file of the engine of ``master`` started with the fixed settings ``fixed``."""
    key = _digest(json.dumps(sorted(fingerprint(fixed).items())), 8)
    slug = _master_slug(master)  # its text redacted, its digest whole
    return engines_dir() / f"{slug}-{key}.json"


def start_lock_path(master: str) -> Path:
    """Held while a run looks for, or starts, an engine of ``master``: two runs start one engine."""
    slug = _master_slug(master)
    return engines_dir() / f"{slug}.start.lock"


def lease_path(state_path: Path) -> Path:
    return state_path.with_suffix(".used")


def served_dir(state_path: Path) -> Path:
    return state_path.with_suffix(".served")


def recorded() -> list[tuple[Path, EngineState]]:
    """Every engine state file of this user (running or not), newest first."""
    directory = engines_dir()
    try:
        paths = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    found = []
    for path in paths:
        state = EngineState.read(path)
        if state is not None:
            found.append((path, state))
    return found


def running() -> list[tuple[Path, EngineState]]:
    """The recorded engines that answer; the record of one whose process is gone is removed."""
    alive = []
    for path, state in recorded():
        if state.alive():
            alive.append((path, state))
        elif not _pid_exists(state.pid):
            path.unlink(missing_ok=True)
    return alive


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def mismatch(state: EngineState, fixed: dict[str, str]) -> list[str]:
    """The fixed settings the pipeline names that the engine runs with another value (or none)."""
    return [k for k, h in fingerprint(fixed).items() if (state.settings or {}).get(k) != h]


def choose(master: str, fixed: dict[str, str]) -> tuple[Path, EngineState | None, str | None]:
    """(state file, running engine, why not) for a pipeline of ``master`` with ``fixed`` settings.

    The engine is the running one on ``master`` whose fixed settings agree with every one the
    pipeline names (settings it does not name are its to keep): the one recorded under the
    pipeline's own key first, else the one used last. With none, the state file is the
    pipeline's own and "why not" says why a running engine of this user is not used (another
    master, another fixed setting), or is None when none runs.
    """
    own = slot_path(master, fixed)
    engines = running()
    engines.sort(key=lambda ps: (ps[0] != own, -last_used(ps[0], ps[1])))
    reasons = []
    for path, state in engines:
        if state.master != master:
            reasons.append(f"the engine at {redact_url(state.url)} runs master {redact_url(state.master)}, "
                           f"not {redact_url(master)}")
            continue
        differs = mismatch(state, fixed)
        if differs:
            reasons.append(f"the engine at {redact_url(state.url)} runs with another {', '.join(differs)} than "
                           "this pipeline's [spark] table, which a session cannot change")
            continue
        return path, state, None
    return own, None, (reasons[0] if reasons else None)


def last_used(path: Path, state: EngineState) -> float:
    """When a run last used the engine (its start when none has)."""
    try:
        return max(lease_path(path).stat().st_mtime, state.started_at)
    except OSError:
        return state.started_at


def read_lease(path: Path) -> dict:
    """What the last run that used the engine asked for (``idle_timeout``, ``pipeline``)."""
    try:
        data = json.loads(lease_path(path).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def idle_timeout_of(state: EngineState, lease: dict) -> float | None:
    """Seconds unused after which the engine stops; None: it runs until stopped.

    An engine started with an idle timeout (every one ``run`` starts) stops after the idle
    timeout of the last run that used it (its pipeline's ``[engine] idle_timeout`` or
    ``--idle-timeout``), at least ``MIN_LEASE_TIMEOUT_S``; before any run, after its own.
    An engine started without one (``minikafka serve``) runs until stopped.
    """
    if not state.idle_timeout:
        return None
    asked = lease.get("idle_timeout")
    if isinstance(asked, (int, float)) and not isinstance(asked, bool) and asked > 0:
        return max(float(asked), MIN_LEASE_TIMEOUT_S)
    return float(state.idle_timeout)


def stops_in(path: Path, state: EngineState, now: float | None = None) -> float | None:
    """Seconds until the engine stops for being idle (0 when due); None when it never does."""
    limit = idle_timeout_of(state, read_lease(path))
    if limit is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, limit - (now - last_used(path, state)))


def mark_used(path: Path, *, pipeline: str | None = None, pipeline_path: str | None = None,
              idle_timeout: float | None = None) -> None:
    """Mark the engine recorded at ``path`` as used now, by ``pipeline`` (which asks for
    ``idle_timeout``), so ``idle_timeout_of`` and ``describe`` see it."""
    try:
        lease = lease_path(path)
        lease.parent.mkdir(parents=True, exist_ok=True)
        if idle_timeout is not None or pipeline is not None:
            data = read_lease(path)
            if idle_timeout:  # 0: stop at the end of the run that started it, not a timeout to keep
                data["idle_timeout"] = float(idle_timeout)
            if pipeline:
                data["pipeline"] = pipeline
            tmp = lease.with_name(lease.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, lease)
        else:
            lease.touch()
        if pipeline_path:
            served = served_dir(path)
            served.mkdir(exist_ok=True)
            entry = served / f"{_digest(pipeline_path, 12)}.json"
            tmp = entry.with_name(entry.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"name": pipeline, "path": pipeline_path}))
            os.replace(tmp, entry)
    except OSError:
        pass


def served(path: Path, state: EngineState) -> list[dict]:
    """The pipelines that used the engine since it started: [{name, path, last_used}], last first."""
    out = []
    try:
        entries = list(served_dir(path).glob("*.json"))
    except OSError:
        return []
    for entry in entries:
        try:
            when = entry.stat().st_mtime
            data = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if when >= state.started_at - 1:
            out.append({"name": data.get("name"), "path": data.get("path"), "last_used": when})
    return sorted(out, key=lambda d: d["last_used"], reverse=True)


def forget_served(path: Path) -> None:
    """A new engine in this slot: the pipelines an engine before it served are not its own."""
    import shutil

    shutil.rmtree(served_dir(path), ignore_errors=True)
    lease_path(path).unlink(missing_ok=True)


def rss_bytes(pid: int) -> int | None:
    """The resident memory of process ``pid`` (Linux ``/proc``), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def describe(path: Path, state: EngineState, now: float | None = None) -> dict:
    """What ``minikafka status``, ``engine status`` and the console show of one running engine."""
    now = time.time() if now is None else now
    limit = idle_timeout_of(state, read_lease(path))
    used = last_used(path, state)
    return {"url": redact_url(state.url), "master": redact_url(state.master), "pid": state.pid,
            "jvm_pid": state.jvm_pid, "started_by": state.pipeline, "started_at": state.started_at,
            "rss_bytes": rss_bytes(state.jvm_pid), "pipelines": served(path, state),
            "idle_s": max(0.0, now - used), "idle_timeout_s": limit,
            "stops_in_s": None if limit is None else max(0.0, limit - (now - used)),
            "state_file": str(path), "log": state.log}


def engines_now(now: float | None = None) -> list[dict]:
    """``describe`` of every running engine of this user."""
    return [describe(path, state, now) for path, state in running()]


def human(seconds: float) -> str:
    """A span for a person: 42s, 3m 05s, 2h 10m."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def describe_lines(engines: list[dict], *, default_timeout: float | None = None, where: str | None = None,
                   now: float | None = None) -> list[str]:
    """The engine section of ``minikafka status`` (and ``engine status``): one block per engine."""
    from ..util.duration import format_duration

    now = time.time() if now is None else now

    if not engines:
        return [none_running_line(default_timeout, where)]
    lines = []
    for e in engines:
        rss = f"{e['rss_bytes'] / (1 << 20):,.0f} MB" if e["rss_bytes"] is not None else "unknown"
        lines.append(f"engine: up at {e['url']}, master {e['master']}, pid {e['pid']} (JVM {e['jvm_pid']}, "
                     f"RSS {rss})")
        names = ", ".join(f"{p['name']} ({human(now - p['last_used'])} ago)" for p in e["pipelines"])
        lines.append(f"    served: {names or 'no pipeline yet'}")
        if e["idle_timeout_s"] is None:
            lines.append(f"    idle for {human(e['idle_s'])}; runs until stopped "
                         "('minikafka engine stop')")
        else:
            lines.append(f"    idle for {human(e['idle_s'])}, stops in {human(e['stops_in_s'])} "
                         f"(idle timeout {format_duration(e['idle_timeout_s'])}); 'minikafka engine stop' stops it now")
    return lines
