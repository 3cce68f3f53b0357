"""Bad arguments of the API's calls raise a ``MinikafkaError`` subclass that is also the builtin
(``ValueError``, ``TypeError``) code written against minikafka catches, in one line naming the
argument; none is a bare builtin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from minikafka import ArgumentTypeError, MinikafkaError

PACKAGE = Path(__file__).resolve().parents[2] / "minikafka"


class Task(BaseModel):
    n: int


CALLS = {
    "schedule every=0": (lambda s, q, t: q.schedule("s", every=0), "every"),
    "enqueue max_attempts=0": (lambda s, q, t: q.enqueue({"n": 1}, max_attempts=0), "max_attempts"),
    "enqueue expires=-1": (lambda s, q, t: q.enqueue({"n": 1}, expires=-1), "expires"),
    "cancel(0)": (lambda s, q, t: q.cancel(0), "job_id"),
    "claim_batch n=-1": (lambda s, q, t: q.claim_batch("w", n=-1), "n must be"),
    "queue visibility_timeout=0": (lambda s, q, t: s.queue("other", Task, visibility_timeout=0),
                                   "visibility_timeout"),
    "group.fetch max_messages=0": (lambda s, q, t: s.group("g").fetch(t, 0, max_messages=0), "max_messages"),
    "read_since offset=-1": (lambda s, q, t: t.read_since(-1), "offset"),
    # numbers past what a 64-bit column or a date holds: one line naming the argument, not OverflowError
    "queue visibility_timeout=1e300": (lambda s, q, t: s.queue("other", Task, visibility_timeout=1e300),
                                       "visibility_timeout"),
    "queue result_ttl=1e300": (lambda s, q, t: s.queue("other", Task, result_ttl=1e300), "result_ttl"),
    "enqueue priority=2**63": (lambda s, q, t: q.enqueue({"n": 1}, priority=2**63), "priority"),
    "enqueue max_attempts=2**63": (lambda s, q, t: q.enqueue({"n": 1}, max_attempts=2**63), "max_attempts"),
    "queue max_attempts=2**63": (lambda s, q, t: s.queue("other", Task, max_attempts=2**63), "max_attempts"),
}


@pytest.mark.parametrize("call", CALLS, ids=list(CALLS))
def test_a_bad_argument_raises_a_minikafka_error_that_is_also_a_value_error(file_source, call):
    make, argument = CALLS[call]
    q = file_source.queue("jobs", Task)
    topic = file_source.topic("tasks", Task, dedup=None)
    with pytest.raises(MinikafkaError, match=argument) as err:
        make(file_source, q, topic)
    assert isinstance(err.value, ValueError) and "\n" not in str(err.value)
    assert q.stats()["pending"] == 0 and "other" not in file_source.topics()  # nothing half-made


def test_a_clock_that_is_not_callable_is_a_minikafka_error_that_is_also_a_type_error(file_source):
    with pytest.raises(ArgumentTypeError, match="clock must be a callable") as err:
        file_source.queue("jobs", Task, clock=5)
    assert isinstance(err.value, TypeError)


def test_no_module_of_the_api_or_the_connectors_raises_a_bare_builtin():
    bare = []
    for folder in ("api", "connectors"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"raise (ValueError|TypeError|KeyError|RuntimeError|OverflowError)\(", line):
                    bare.append(f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}")
    allowed = {"api/core/record.py", "api/modes/windows.py"}  # misuse of an object's life cycle, below
    assert [b for b in bare if b.split(":")[0] not in allowed] == []
