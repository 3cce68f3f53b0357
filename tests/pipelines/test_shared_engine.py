"""One warm engine per user and master, shared by every pipeline: a second pipeline file reuses
the running engine, each pipeline's sessions run its own code, and the engine shows in
``status`` (up, master, the pipelines it served, its JVM's memory, idle for / stops in) and stops
after its idle timeout."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path

import pytest

from minikafka import Source
from minikafka.spark import engines
from minikafka.spark.engine import EngineState
from tests.pipelines.helpers import generate, homelab_copy
from tests.pipelines.test_engine_cli import engine_state, ingested, mk
from tests.util.procscan import children_by_parent


def engine_jvms(pid: int) -> list[int]:
    """The Java processes in the process tree under ``pid`` (the engine's supervisor): not every
    JVM of the machine, where other tests and CI run their own."""
    children = children_by_parent()
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                if (Path("/proc") / str(child) / "comm").read_text().strip() == "java":
                    found.append(child)
            except OSError:
                continue
    return found


def gone(pid: int) -> bool:
    """The process has exited (a zombie this test process, its parent, has not reaped counts)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# -- without a JVM: the engine's state file as a running engine leaves it ---------------------------

@pytest.fixture
def fake_engine(tmp_path):
    """A state file as a running engine of master local[2] leaves it: its supervisor is this
    process, its "JVM" this process too (for its memory), its port a real listening socket."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        path = engines.slot_path("local[2]", {"spark.driver.memory": "1g"})
        state = EngineState(f"sc://127.0.0.1:{port}", os.getpid(), os.getpid(), "local[2]", "homelab",
                            time.time() - 600, 600.0, None, engines.fingerprint({"spark.driver.memory": "1g"}))
        state.write(path)
        yield path, state


def test_status_shows_the_engine_and_its_idle_timeout(tmp_path, fake_engine):
    path, state = fake_engine
    pipeline = homelab_copy(tmp_path)
    assert mk("ingest", pipeline, "rss.items", generate(tmp_path, 3)).returncode == 0
    now = time.time()
    engines.mark_used(path, pipeline="homelab", pipeline_path=str(pipeline.resolve()), idle_timeout=600)
    engines.mark_used(path, pipeline="flights", pipeline_path="/srv/flights/flights.toml")
    os.utime(engines.lease_path(path), (now - 65, now - 65))  # last used 65 s ago
    for entry in engines.served_dir(path).iterdir():
        os.utime(entry, (now - 65, now - 65))

    out = mk("status", "--pipeline", pipeline)
    assert out.returncode == 0, out.stderr
    section = out.stdout.split("\n\n")[-1].splitlines()
    assert section[0].startswith(f"engine: up at {state.url}, master local[2], pid {os.getpid()} "
                                 f"(JVM {os.getpid()}, RSS ") and section[0].endswith(" MB)")
    assert re.fullmatch(r"    served: (flights|homelab) \(1m \d\ds ago\), (homelab|flights) \(1m \d\ds ago\)", section[1])
    assert re.fullmatch(r"    idle for 1m \d\ds, stops in 8m \d\ds \(idle timeout 10m\); 'minikafka engine stop' "
                        "stops it now", section[2]), section[2]

    listed = json.loads(mk("engine", "status", "--json").stdout)
    assert [(e["url"], e["master"], e["idle_timeout_s"]) for e in listed] == [(state.url, "local[2]", 600.0)]
    assert sorted(p["name"] for p in listed[0]["pipelines"]) == ["flights", "homelab"]
    assert 64 <= listed[0]["idle_s"] < 120 and listed[0]["idle_s"] + listed[0]["stops_in_s"] == pytest.approx(600)
    assert listed[0]["rss_bytes"] > 0
    assert mk("status", "--pipeline", pipeline, "--json").stdout.lstrip().startswith("[")  # the runs alone

    path.unlink()  # the engine is down: status says so, and what a run would start
    out = mk("status", "--pipeline", pipeline)
    assert out.stdout.splitlines()[-1] == ("engine: none running; 'minikafka run' starts one that stops after 10m "
                                           f"unused ([engine] idle_timeout in {pipeline})")


def test_status_without_a_pipeline_says_nothing_of_an_engine_when_none_runs(tmp_path):
    pipeline = homelab_copy(tmp_path)
    assert mk("ingest", pipeline, "rss.items", generate(tmp_path, 3)).returncode == 0
    out = mk("status", "--source", tmp_path / "homelab.sqlite")
    assert out.returncode == 0 and "engine" not in out.stdout


def test_the_idle_timeout_of_the_last_run_that_used_the_engine_decides(fake_engine):
    path, state = fake_engine
    used = time.time()
    engines.mark_used(path, pipeline="homelab", idle_timeout=1800)
    os.utime(engines.lease_path(path), (used, used))
    assert engines.stops_in(path, state, now=used + 600) == pytest.approx(1200)
    engines.mark_used(path, pipeline="flights", idle_timeout=60)
    os.utime(engines.lease_path(path), (used, used))
    assert engines.stops_in(path, state, now=used + 30) == pytest.approx(30)
    assert engines.stops_in(path, state, now=used + 61) == 0
    engines.mark_used(path, pipeline="flights", idle_timeout=1)  # never below two marks of a running run
    os.utime(engines.lease_path(path), (used, used))
    assert engines.stops_in(path, state, now=used + 5) == pytest.approx(engines.MIN_LEASE_TIMEOUT_S - 5)
    kept = EngineState(state.url, state.pid, state.jvm_pid, state.master, "homelab", state.started_at, None)
    assert engines.stops_in(path, kept, now=used + 10**6) is None  # 'minikafka serve': runs until stopped


def test_an_engine_is_shared_only_by_pipelines_whose_fixed_settings_agree(fake_engine):
    path, state = fake_engine
    assert engines.choose("local[2]", {"spark.driver.memory": "1g"})[1] == state
    assert engines.choose("local[2]", {})[1] == state  # a setting it does not name is the engine's to keep
    assert engines.is_fixed("spark.driver.memory") and engines.is_fixed("spark.sql.extensions")
    assert not engines.is_fixed("spark.sql.shuffle.partitions")  # each session sets its own
    own, found, why = engines.choose("local[2]", {"spark.driver.memory": "2g"})
    assert found is None and own != path
    assert why == (f"the engine at {state.url} runs with another spark.driver.memory than this pipeline's [spark] "
                   "table, which a session cannot change")
    own, found, why = engines.choose("local[*]", {"spark.driver.memory": "1g"})
    assert found is None and why == f"the engine at {state.url} runs master local[2], not local[*]"
    assert "1g" not in path.read_text()  # the state file holds digests, never a setting's value


# -- a real engine ------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.slow
def test_a_second_pipeline_file_reuses_the_running_engine(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = ingested(tmp_path / "a", 30), ingested(tmp_path / "b", 30)
    try:
        out = mk("run", first, "--stage", "keep_articles")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "starting an engine for homelab" in out.stderr
        state = engine_state()
        assert state is not None and len(engine_jvms(state.pid)) == 1

        out = mk("run", second, "--stage", "keep_articles")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "starting an engine" not in out.stderr and "another engine" not in out.stderr
        assert engine_state() == state  # the same engine, and no other recorded
        assert len(engine_jvms(state.pid)) == 1
        for home in ("a", "b"):
            with Source(str(tmp_path / home / "homelab.sqlite")) as src:
                (run,) = src.runs(stage="keep_articles")
                assert run["status"] == "succeeded" and run["rows_out"] > 0
                assert run["details"]["session"] == "connect"
        shown = json.loads(mk("engine", "status", "--json").stdout)
        assert [e["url"] for e in shown] == [state.url]
        assert sorted(p["path"] for p in shown[0]["pipelines"]) == sorted(str(p.resolve()) for p in (first, second))
        assert shown[0]["rss_bytes"] > 0
    finally:
        mk("engine", "stop")
    assert engine_state() is None


@pytest.mark.spark
@pytest.mark.slow
def test_the_engine_stops_after_its_idle_timeout(tmp_path):
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.launch.engine import ensure_engine

    said: list[str] = []
    url, started = ensure_engine(load_pipeline(homelab_copy(tmp_path), suites=False), idle_timeout=2,
                                 echo=said.append)
    assert started and said == ["starting an engine for homelab (stops after 2 s unused)"]
    (path, state), = engines.recorded()
    assert state.url == url and engines.stops_in(path, state) <= 2
    jvms = engine_jvms(state.pid)
    assert len(jvms) == 1
    deadline = time.monotonic() + 60  # it stops 2 s after it was ready; its JVM takes seconds to exit
    while (path.exists() or not all(gone(p) for p in [state.pid, *jvms])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not path.exists() and gone(jvms[0]) and gone(state.pid)
    assert "stopped after 2 s unused" in path.with_suffix(".serve.log").read_text()


PROJECT_FILES = {
    "tagmodels/__init__.py": '''
from pydantic import BaseModel


class Item(BaseModel):
    url: str
    n: int


class Tagged(BaseModel):
    url: str
    tag: str
''',
    "tagjobs/__init__.py": "",
    "tagjobs/frame.py": '''
from pyspark.sql import functions as F

from minikafka.job import main


def transform(df):
    return df.select("_id", "url", F.lit("{tag}").alias("tag"))


if __name__ == "__main__":
    raise SystemExit(main())
''',
    "tagjobs/rows.py": '''
from minikafka.job import main
from tagmodels import Tagged


def row_fn(item):
    return Tagged(url=item.url, tag="{tag}")


if __name__ == "__main__":
    raise SystemExit(main())
''',
    "tags.toml": '''
[pipeline]
name = "tags_{tag}"
source = "tags.sqlite"
master = "local[2]"

[topics.items]
model = "tagmodels:Item"
dedup = ["url"]

[topics.by_frame]
model = "tagmodels:Tagged"
dedup = ["url"]

[topics.by_rows]
model = "tagmodels:Tagged"
dedup = ["url"]

[[stages]]
name = "frame"
job = "tagjobs.frame"
inputs = ["items"]
outputs = ["by_frame"]

[[stages]]
name = "rows"
job = "tagjobs.rows"
inputs = ["items"]
outputs = ["by_rows"]
''',
}


def project(home: Path, tag: str) -> Path:
    """A project of its own: its pipeline file, models and jobs (the same module names in every
    project, the code tagging each row with ``tag``), and a ledger with five items."""
    for name, text in PROJECT_FILES.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text.replace("{tag}", tag).lstrip())
    dump = home / "items.jsonl"
    dump.write_text("".join(json.dumps({"url": f"https://x/{i}", "n": i}) + "\n" for i in range(5)))
    done = mk("ingest", "tags.toml", "items", dump, cwd=home)
    assert done.returncode == 0, done.stderr
    return home / "tags.toml"


@pytest.mark.spark
@pytest.mark.slow
def test_two_pipelines_with_same_named_job_modules_each_run_their_own_code(tmp_path):
    homes = {tag: tmp_path / tag for tag in ("A", "B")}
    for tag, home in homes.items():
        home.mkdir()
        project(home, tag)
    try:
        for tag, home in homes.items():
            out = mk("run", "tags.toml", cwd=home)
            assert out.returncode == 0, out.stdout + out.stderr
            assert ("starting an engine" in out.stderr) == (tag == "A"), out.stderr  # B uses A's engine
        for tag, home in homes.items():
            for topic in ("by_frame", "by_rows"):  # the DataFrame transform and the per-row function
                shown = mk("show", topic, "--limit", "0", "--json", "--source", home / "tags.sqlite")
                rows = json.loads(shown.stdout)
                assert len(rows) == 5 and {row["tag"] for row in rows} == {tag}, (tag, topic, rows)
    finally:
        mk("engine", "stop")


def test_the_console_overview_shows_the_engine(tmp_path, fake_engine):
    pytest.importorskip("starlette")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from minikafka.console.app import create_app
    from minikafka.pipelines import load_pipeline

    path, state = fake_engine
    pipeline = homelab_copy(tmp_path)
    assert mk("ingest", pipeline, "rss.items", generate(tmp_path, 3)).returncode == 0
    engines.mark_used(path, pipeline="homelab", pipeline_path=str(pipeline.resolve()), idle_timeout=600)
    defn = load_pipeline(pipeline, suites=False)
    with TestClient(create_app(tmp_path / "homelab.sqlite", pipelines=[defn]), base_url="http://127.0.0.1") as c:
        page = c.get("/").text
    row = re.search(r'<tr data-engine="([^"]+)"><td>up at [^<]+</td><td>([^<]+)</td><td>([^<]+)</td>'
                    r'<td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td></tr>', page)
    assert row is not None, page[page.find('id="engine"'):][:800]
    assert row.group(1) == state.url and row.group(2) == "local[2]" and row.group(3).endswith(" MB")
    assert row.group(4).startswith("homelab (") and row.group(5).endswith("s")
    assert row.group(6).endswith("(idle timeout 10m)")
    path.unlink()
    with TestClient(create_app(tmp_path / "homelab.sqlite", pipelines=[defn]), base_url="http://127.0.0.1") as c:
        page = c.get("/").text
    assert "None running: <code>minikafka run</code> starts one that stops after 10m unused" in page


@pytest.mark.spark
@pytest.mark.slow
def test_a_pipeline_whose_start_time_setting_differs_gets_an_engine_of_its_own_and_says_why(tmp_path, fake_engine):
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.launch.engine import ensure_engine, stop_engine

    path, running = fake_engine  # an engine of local[2] started with spark.driver.memory = 1g
    defn = load_pipeline(homelab_copy(tmp_path, replace={'"spark.driver.memory" = "1g"': '"spark.driver.memory" = "2g"'}),
                         suites=False)
    said: list[str] = []
    try:
        url, started = ensure_engine(defn, echo=said.append)
        assert started and url != running.url
        assert said == [f"another engine: the engine at {running.url} runs with another spark.driver.memory than this "
                        "pipeline's [spark] table, which a session cannot change",
                        "starting an engine for homelab (stops after 600 s unused)"]
        assert sorted(state.url for _p, state in engines.running()) == sorted([running.url, url])
    finally:
        stop_engine(defn)
    assert [state.url for _p, state in engines.running()] == [running.url]
