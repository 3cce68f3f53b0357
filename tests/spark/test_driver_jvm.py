"""The Java options of a stage's spark-submit driver: C1 alone for a small stage, and the
class-data-sharing archive of Spark's classes (written by a first run, mapped by the next)."""

from __future__ import annotations

import pytest

from minikafka.spark.stages import driver_jvm
from minikafka.spark.stages.driver_jvm import SMALL_STAGE_ROWS, driver_options, keep_archive

pytest.importorskip("pyspark")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(driver_jvm.CDS_ENV, raising=False)
    if driver_jvm.archive_path() is None:
        pytest.skip("no Java")
    return tmp_path / "cache" / "minikafka"


def test_a_small_stage_runs_its_driver_with_c1_alone_and_a_large_or_unknown_one_keeps_c2():
    assert "-XX:TieredStopAtLevel=1" in driver_options("-Duser.timezone=UTC", 10_000)[0]
    assert "-XX:TieredStopAtLevel=1" not in driver_options("-Duser.timezone=UTC", SMALL_STAGE_ROWS + 1)[0]
    assert "-XX:TieredStopAtLevel=1" not in driver_options("-Duser.timezone=UTC", None)[0]
    assert driver_options("-Duser.timezone=UTC", None)[0].startswith("-Duser.timezone=UTC ")


def test_the_first_run_writes_the_archive_beside_it_and_it_takes_its_place_only_when_the_run_ended_well(cache):
    options, written = driver_options("", 10)
    assert f"-XX:ArchiveClassesAtExit={written}" in options and written.parent == cache
    written.write_bytes(b"archive")
    keep_archive(written, ok=True)
    final = driver_jvm.archive_path()
    assert final.read_bytes() == b"archive" and not written.exists()
    options, again = driver_options("", 10)
    assert again is None and f"-XX:SharedArchiveFile={final}" in options  # the next runs map it

    final.unlink()
    _, broken = driver_options("", 10)
    broken.write_bytes(b"half")  # a run killed while its JVM wrote the archive
    keep_archive(broken, ok=False)
    assert not broken.exists() and not final.exists()


def test_a_second_archive_written_meanwhile_does_not_replace_the_first(cache):
    _, one = driver_options("", 10)
    _, two = driver_options("", 10)
    one.write_bytes(b"one")
    two.write_bytes(b"two")
    keep_archive(one, ok=True)
    keep_archive(two, ok=True)
    assert driver_jvm.archive_path().read_bytes() == b"one" and not two.exists()


def test_the_archive_is_off_when_the_environment_says_so(monkeypatch):
    monkeypatch.setenv(driver_jvm.CDS_ENV, "0")
    options, written = driver_options("-Duser.timezone=UTC", 10)
    assert written is None and "SharedArchiveFile" not in options and "ArchiveClassesAtExit" not in options


def test_the_submit_command_carries_the_driver_options_unless_the_pipeline_sets_its_own(tmp_path):
    from minikafka.pipelines import load_pipeline
    from minikafka.pipelines.launch.submit import submit_command
    from tests.pipelines.helpers import homelab_copy

    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    cmd = submit_command(defn, defn.stage("keep_articles"), master="local[2]", run_id="r1",
                         consumer_ids={"rss.items": 7}, java_options="-XX:TieredStopAtLevel=1")
    assert "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1" in cmd
    assert cmd[cmd.index("--consumer-id") + 1] == "rss.items=7"
    line = '"spark.sql.shuffle.partitions" = "4"'
    own = load_pipeline(homelab_copy(tmp_path, replace={line: line + '\n"spark.driver.extraJavaOptions" = "-Xss4m"'}),
                        suites=False)
    cmd = submit_command(own, own.stage("keep_articles"), master="local[2]", run_id="r1",
                         java_options="-XX:TieredStopAtLevel=1")
    assert "spark.driver.extraJavaOptions=-Xss4m" in cmd and "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1" not in cmd


def test_an_engine_has_an_archive_of_its_own_beside_the_stage_drivers(cache):
    stage, engine = driver_jvm.archive_path(), driver_jvm.archive_path("engine")
    assert stage.parent == engine.parent == cache and stage != engine and engine.name.startswith("engine-")
    options, written = driver_options("-Duser.timezone=UTC", None, kind="engine")
    assert written.name.startswith(engine.name) and "-XX:TieredStopAtLevel=1" not in options
    written.write_bytes(b"engine")
    keep_archive(written, ok=True)
    assert engine.read_bytes() == b"engine" and not stage.exists()
    assert f"-XX:SharedArchiveFile={engine}" in driver_options("", None, kind="engine")[0]
