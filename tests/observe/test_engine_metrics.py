"""The engine's own Prometheus families (``minikafka serve --metrics-port``), without a JVM:
well formed for Prometheus' parser, named by convention, the master's credentials masked."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from minikafka.observe.engine_metrics import ENGINE_FAMILIES, EngineFacts, render_engine
from minikafka.util.redact import redact_url


def parsed(text: str) -> dict:
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def test_an_engines_figures_parse_as_gauges_with_the_master_label_and_no_credentials():
    master = redact_url("spark://admin:hunter2-secret@cluster.lan:7077")
    text = render_engine(EngineFacts(master, 1_764_000_000.5, 600.0, 12.25, 2, 900 << 20))
    families = parsed(text)
    assert set(families) == {f.name for f in ENGINE_FAMILIES}
    assert "hunter2-secret" not in text and "admin" not in text
    for name, (kind, samples) in families.items():
        assert name.startswith("minikafka_engine_") and kind == "gauge" and not name.endswith("_total")
        assert [s.labels for s in samples] == [{"master": "spark://cluster.lan:7077"}]
    assert families["minikafka_engine_stops_in_seconds"][1][0].value == 12.25
    assert families["minikafka_engine_jvm_resident_memory_bytes"][1][0].value == 900 << 20


def test_an_engine_without_idle_timeout_or_readable_memory_leaves_those_series_out():
    families = parsed(render_engine(EngineFacts("local[2]", 1.0, None, None, 0, None)))
    assert "minikafka_engine_stops_in_seconds" not in families
    assert "minikafka_engine_jvm_resident_memory_bytes" not in families
    assert families["minikafka_engine_idle_timeout_seconds"][1][0].value == 0
    assert families["minikafka_engine_up"][1][0].value == 1
