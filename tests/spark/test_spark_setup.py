"""Spark set-up errors name what to install (no JVM started)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from minikafka.spark.session import SparkSetupError, check_java, jdbc_jar, session_conf  # noqa: E402


def test_missing_jar_names_the_debian_package(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIKAFKA_SQLITE_JDBC_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(SparkSetupError, match="apt-get install libxerial-sqlite-jdbc-java"):
        jdbc_jar()


def test_jar_override_order(monkeypatch, tmp_path):
    env_jar, conf_jar = tmp_path / "env.jar", tmp_path / "conf.jar"
    env_jar.write_text("x")
    conf_jar.write_text("x")
    monkeypatch.setenv("MINIKAFKA_SQLITE_JDBC_JAR", str(env_jar))
    assert jdbc_jar() == str(env_jar)
    assert jdbc_jar(str(conf_jar)) == str(conf_jar)


def test_missing_java_names_the_package(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SparkSetupError, match="openjdk-17-jre-headless"):
        check_java()


def test_session_conf_is_utc_quiet_and_small():
    conf = session_conf(jar="/x.jar", testing=True)
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.ui.enabled"] == "false" and conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.driver.extraClassPath"] == "/x.jar"


def test_the_driver_jvm_gets_the_parallel_collector_unless_its_environment_names_one(monkeypatch):
    from minikafka.spark.session import session_conf

    for var in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        monkeypatch.delenv(var, raising=False)
    assert session_conf(jar="x.jar")["spark.driver.extraJavaOptions"] == "-Duser.timezone=UTC -XX:+UseParallelGC"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss4m -XX:+UseG1GC")  # two collectors: the JVM would not start
    assert session_conf(jar="x.jar")["spark.driver.extraJavaOptions"] == "-Duser.timezone=UTC"
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss4m")
    assert "-XX:+UseParallelGC" in session_conf(jar="x.jar")["spark.driver.extraJavaOptions"]
