"""A run's options are checked once (RunOptions) and the command line and the library share
one default engine."""

from __future__ import annotations

import click
import pytest

from minikafka.cli import main
from minikafka.pipelines import PipelineDefinitionError, load_pipeline
from minikafka.pipelines.options import DEFAULT_ENGINE, ENGINE_ENV, RunOptions
from minikafka.pipelines.runner import run_pipeline
from tests.pipelines.helpers import homelab_copy


def test_the_library_and_the_command_default_to_the_same_engine(monkeypatch):
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    assert RunOptions().engine == DEFAULT_ENGINE == "auto"
    engine = next(p for p in main.commands["run"].params if p.name == "engine")
    # the command leaves the default (and $MINIKAFKA_ENGINE) to RunOptions
    assert engine.envvar is None and engine.default in (None, getattr(click.core, "UNSET", None))
    monkeypatch.setenv(ENGINE_ENV, "submit")
    assert RunOptions().engine == "submit"


@pytest.mark.parametrize(("given", "message"), [
    ({"strategy": "sometimes"}, "strategy must be 'strict' or 'best_effort', got 'sometimes'"),
    ({"engine": "warp"}, "engine must be one of"),
    ({"max_parallel": 0}, "max_parallel must be >= 1, got 0"),
])
def test_a_run_option_no_run_takes_is_one_line_naming_it(given, message):
    with pytest.raises(PipelineDefinitionError, match=message):
        RunOptions(**given)


def test_run_pipeline_takes_run_options_or_keywords_not_both(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    with pytest.raises(TypeError, match="not both"):
        run_pipeline(defn, RunOptions(), dry_run=True)


def test_run_options_take_the_pipelines_master_and_staging_when_none_is_given(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    assert RunOptions().of(defn).master == defn.master
    assert RunOptions(master="local[3]").of(defn).master == "local[3]"


def test_the_logical_date_is_the_one_given_else_the_runs_utc_start_date_for_every_stage(tmp_path):
    from datetime import date, datetime, timezone

    from minikafka.util.clock import ManualClock, use_clock

    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    assert RunOptions(logical_date="2024-03-31").of(defn).logical_date == date(2024, 3, 31)
    assert RunOptions(logical_date=date(2024, 3, 31)).logical_date == date(2024, 3, 31)
    with use_clock(ManualClock(datetime(2024, 4, 1, 23, 59, 59, tzinfo=timezone.utc))):
        fixed = RunOptions().of(defn)  # fixed once, when the run starts: a run past midnight keeps its date
    assert fixed.logical_date == date(2024, 4, 1)


@pytest.mark.parametrize("bad", ["2024-02-30", "31/03/2024", "20240331", "yesterday"])
def test_a_bad_logical_date_is_one_line_naming_the_form_before_anything_runs(tmp_path, bad):
    from click.testing import CliRunner

    with pytest.raises(PipelineDefinitionError, match="logical date must be a date YYYY-MM-DD"):
        RunOptions(logical_date=bad)
    out = CliRunner().invoke(main, ["run", str(homelab_copy(tmp_path)), "--logical-date", bad])
    assert out.exit_code == 2
    assert out.output.strip().splitlines() == [
        f"Error: logical date must be a date YYYY-MM-DD (e.g. 2024-03-31), got {bad!r}"]
