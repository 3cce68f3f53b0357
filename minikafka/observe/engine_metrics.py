"""The Prometheus exposition of a running engine (``minikafka serve --metrics-port``).

What only the engine's process knows, beside what the ledger records: that it is up, when it
started, when it will stop unused, how many pipeline files it served, and the memory its JVM
holds. One label, ``master`` (the Spark master, its URL's credentials masked): one engine per
user and master, so the label is bounded. Scraping it reads a few files and one
``/proc/PID/status``; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from .prometheus import Family, escape_label, format_value

ENGINE = ("master",)

ENGINE_FAMILIES = [
    Family("minikafka_engine_up", "1 while the engine answers (a scrape that fails to connect means it is down).",
           ENGINE),
    Family("minikafka_engine_start_timestamp_seconds", "When the engine became ready.", ENGINE),
    Family("minikafka_engine_idle_timeout_seconds", "How long the engine waits unused before it stops "
           "(0: until stopped).", ENGINE),
    Family("minikafka_engine_stops_in_seconds", "Seconds left before the engine stops unused (absent: no idle "
           "timeout).", ENGINE),
    Family("minikafka_engine_pipelines", "Pipeline files whose stages the engine ran since it started.", ENGINE),
    Family("minikafka_engine_jvm_resident_memory_bytes", "Resident memory of the engine's JVM (absent: not "
           "readable).", ENGINE),
]


@dataclass(frozen=True)
class EngineFacts:
    """One reading of a running engine (``master`` already masked)."""

    master: str
    started: float
    idle_timeout: float | None
    stops_in: float | None
    pipelines: int
    jvm_rss_bytes: int | None


def render_engine(facts: EngineFacts) -> str:
    """The exposition text of ``facts`` (families without a value are left out)."""
    values = {
        "minikafka_engine_up": 1,
        "minikafka_engine_start_timestamp_seconds": facts.started,
        "minikafka_engine_idle_timeout_seconds": facts.idle_timeout or 0,
        "minikafka_engine_stops_in_seconds": None if facts.stops_in is None else max(facts.stops_in, 0.0),
        "minikafka_engine_pipelines": facts.pipelines,
        "minikafka_engine_jvm_resident_memory_bytes": facts.jvm_rss_bytes,
    }
    label = f'{{master="{escape_label(facts.master)}"}}'
    lines: list[str] = []
    for family in ENGINE_FAMILIES:
        value = values[family.name]
        if value is None:
            continue
        lines += [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.type}",
                  f"{family.name}{label} {format_value(value)}"]
    return "\n".join(lines) + "\n"
