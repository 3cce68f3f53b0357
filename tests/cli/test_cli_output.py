"""What the CLI prints: results on stdout, notes on stderr; --quiet, --debug, --json, show
--csv/--table, export by suffix with --where, and "nothing to do" said out loud."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import click
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from minikafka import Source
from minikafka.cli import main
from tests.cli.helpers import Item, invoke, seed
from tests.pipelines.helpers import ROOT, homelab_copy

REPORTING = ["run", "check", "ingest", "backfill", "deliver", "work", "watch", "topics", "status", "show", "schema",
             "consumers", "quarantine", "prune"]


def run(*args, input=None):
    """The command with stdout and stderr apart."""
    env = {"MINIKAFKA_SOURCE": None, "MINIKAFKA_PIPELINE": None, "MINIKAFKA_VERBOSE": None}
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env, catch_exceptions=False)


# -- show ---------------------------------------------------------------------------------
def test_show_with_no_rows_says_so_on_stderr_and_leaves_stdout_clean(db_path):
    seed(db_path, n=2)
    out = run("show", "items", "--status", "handled", "--source", db_path)
    assert out.exit_code == 0 and out.stdout == "" and "no rows of items match" in out.stderr
    empty = run("show", "items", "--where", "title=zz", "--json", "--source", db_path)
    assert json.loads(empty.stdout) == [] and empty.stderr == ""
    quiet = run("show", "items", "--status", "handled", "--quiet", "--source", db_path)
    assert quiet.stdout == "" and quiet.stderr == ""


def test_show_csv_has_a_header_and_reads_back(db_path):
    seed(db_path, n=3)
    out = run("show", "items", "--csv", "--source", db_path)
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert list(rows[0]) == ["_id", "_created_at", "_status", "_parent_id", "title", "url", "score", "lang"]
    assert [(r["url"], r["score"], r["lang"]) for r in rows] == [("u0", "0.0", ""), ("u1", "0.1", "en"),
                                                                 ("u2", "0.2", "")]
    none = run("show", "items", "--csv", "--where", "url=zz", "--source", db_path)
    assert none.stdout.startswith("_id,_created_at") and len(none.stdout.splitlines()) == 1


def test_show_table_aligns_columns_and_one_shape_at_a_time(db_path):
    seed(db_path, n=3)
    out = run("show", "items", "--table", "--source", db_path)
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["_id", "_created_at", "_status", "_parent_id", "title", "url", "score", "lang"]
    assert set(lines[1].replace(" ", "")) == {"-"} and len(lines) == 5
    assert lines[2].index("t0") == lines[0].index("title")
    both = run("show", "items", "--table", "--csv", "--source", db_path)
    assert both.exit_code == 2 and "--csv or --table" in both.stderr or "--table or --csv" in both.stderr
    follow = run("show", "items", "--table", "--follow", "--source", db_path)
    assert follow.exit_code == 2


# -- export -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, read", [
    ("out.parquet", lambda p: [r["url"] for r in pq.read_table(p).to_pylist()]),
    ("out.jsonl", lambda p: [json.loads(line)["url"] for line in p.read_text().splitlines()]),
    ("out.json", lambda p: [r["url"] for r in json.loads(p.read_text())]),
    ("out.csv", lambda p: [r["url"] for r in csv.DictReader(io.StringIO(p.read_text()))]),
])
def test_export_takes_the_format_from_the_suffix(db_path, tmp_path, name, read):
    seed(db_path, n=3)
    out = run("export", "items", tmp_path / name, "--source", db_path)
    assert out.exit_code == 0, out.output
    assert read(tmp_path / name) == ["u0", "u1", "u2"]


def test_export_where_filters_with_values_as_parameters(db_path, tmp_path):
    seed(db_path, n=5)
    target = tmp_path / "some.csv"
    out = run("export", "items", target, "--where", "score>=0.2", "--where", "lang=en", "--source", db_path)
    assert out.exit_code == 0 and "exported 1 row(s)" in out.stdout
    assert [r["url"] for r in csv.DictReader(io.StringIO(target.read_text()))] == ["u3"]
    sneaky = run("export", "items", tmp_path / "x.json", "--where", "title = x' OR '1'='1", "--source", db_path)
    assert sneaky.exit_code == 0 and json.loads((tmp_path / "x.json").read_text()) == []
    bad = run("export", "items", tmp_path / "y.json", "--where", "nope=1", "--source", db_path)
    assert bad.exit_code == 2 and "no column 'nope'" in bad.stderr and not (tmp_path / "y.json").exists()


def test_export_without_a_telling_suffix_asks_for_format(db_path, tmp_path):
    seed(db_path, n=1)
    for path in ("-", tmp_path / "dump.txt"):
        out = run("export", "items", path, "--source", db_path)
        assert out.exit_code == 2 and "--format" in out.stderr, path
    ok = run("export", "items", "-", "--format", "csv", "--source", db_path)
    assert ok.exit_code == 0 and ok.stdout.startswith("_id,") and "exported 1 row(s)" in ok.stderr


# -- --quiet, --debug ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_takes_quiet_and_debug(name):
    opts = {o for p in main.commands[name].params if isinstance(p, click.Option) for o in p.opts}
    assert {"--quiet", "-q", "--debug"} <= opts, name


def test_quiet_works_before_and_after_the_command(tmp_path):
    pipeline = homelab_copy(tmp_path)
    for args in (["--quiet", "run", pipeline, "--create"], ["run", pipeline, "-q"]):
        out = run(*args)
        assert out.exit_code == 0 and out.stderr == "" and "total" in out.stdout, args
    loud = run("run", pipeline)
    assert "-> split_youtube" in loud.stderr


def test_debug_prints_the_traceback_and_log_lines_the_default_one_error_line(db_path):
    seed(db_path)

    def mk(*args):
        return subprocess.run([sys.executable, "-m", "minikafka.cli", *args], capture_output=True, text=True,
                              cwd=ROOT)

    plain = mk("schema", "nope", "--source", db_path)
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and plain.stderr.startswith("Error: ")
    for args in (["--debug", "schema", "nope", "--source", db_path], ["schema", "nope", "--debug", "--source", db_path]):
        debug = mk(*args)
        assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
        assert "TopicNotFoundError" in debug.stderr and debug.stderr.rstrip().splitlines()[-1].startswith("Error: ")
        assert "DEBUG minikafka.cli: opening the ledger" in debug.stderr


# -- --json -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", REPORTING)
def test_every_reporting_command_takes_json_and_its_help_lists_the_keys(name):
    cmd = main.commands[name]
    assert "--json" in {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    text = invoke(name, "--help").output.split("\nOptions:")[0]
    assert re.search(r"--json (prints|keys)", " ".join(text.split())), name


def test_run_and_check_with_nothing_pending_say_so_in_text_and_json(tmp_path):
    pipeline = homelab_copy(tmp_path)
    first = run("run", pipeline, "--create")
    assert first.exit_code == 0 and "nothing to do: no stage had new rows" in first.stdout.splitlines()[-1]
    data = json.loads(run("run", pipeline, "--json").stdout)
    assert data["ok"] and data["nothing_to_do"] and not data["dry_run"]
    assert [s["stage"] for s in data["stages"]] == ["split_youtube", "keep_articles", "transcribe", "llm_summary",
                                                      "score", "feed_day"]
    assert set(data["stages"][0]) >= {"status", "run_id", "rows_in", "rows_out", "rows_duplicate", "report",
                                      "failed_expectations"}
    dry = run("run", pipeline, "--dry-run")
    assert dry.stdout.startswith("dry run: nothing was written")
    check = run("check", pipeline)
    assert check.exit_code == 0 and check.stdout.startswith("nothing to check: no stage of homelab has new rows")
    checked = json.loads(run("check", pipeline, "--json").stdout)
    assert checked["ok"] and checked["nothing_pending"] and len(checked["stages"]) == 6 and checked["warnings"] == []


def test_ingest_and_watch_print_one_json_object(tmp_path, db_path):
    seed(db_path, n=0)
    lines = '{"title": "a", "url": "x1", "score": 1}\n{"title": "a", "url": "x1", "score": 1}\nnot json\n'
    out = run("ingest", "--source", db_path, "items", "-", "--json", input=lines)
    assert json.loads(out.stdout) == {"topic": "items", "file": "<stdin>", "lines": 3, "appended": 1,
                                      "duplicates": 1, "quarantined": 1, "already_quarantined": 0, "blank": 0}
    pipeline = homelab_copy(tmp_path)
    Source(str(tmp_path / "homelab.sqlite")).close()
    watched = json.loads(run("watch", pipeline, "--until-idle", "--json").stdout)
    assert watched["runs"] == 0 and watched["failed"] == 0 and watched["interrupted"] is False


def test_work_once_and_deliver_once_print_one_json_object(tmp_path):
    from tests.connectors.scripted_server import ScriptedServer
    from tests.connectors.test_delivery import deliveries_file, fill

    db = str(tmp_path / "ledger.sqlite")
    with Source(db) as source:
        q = source.queue("feed", Item)
        for i in range(3):
            q.enqueue({"title": "t", "url": f"u{i}", "score": 1.0})
    (tmp_path / "noop.py").write_text("def handle(item):\n    pass\n")
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"}
    work = subprocess.run([sys.executable, "-m", "minikafka.cli", "work", "noop:handle", "--queue", "feed", "--once",
                           "--json", "--source", db], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert work.returncode == 0, work.stderr
    report = json.loads(work.stdout)
    assert (report["claimed"], report["acked"], report["interrupted"]) == (3, 3, False) and report["run_id"]
    fill(str(tmp_path / "orders.sqlite"), 4)
    with ScriptedServer([200]) as server:
        path = deliveries_file(tmp_path, server.url)
        path.write_text(path.read_text().replace("ledger.sqlite", "orders.sqlite"))
        done = subprocess.run([sys.executable, "-m", "minikafka.cli", "deliver", str(path), "--once", "--json"],
                              capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["delivered"] == 4 and report["partitions"][0]["committed"] == 4 and report["errors"] == []
