"""Every write path that fails leaves the file exactly as it was."""

from __future__ import annotations

import pytest

from tests.conftest import Cleaned, Video


def dump(source) -> list[str]:
    return list(source._ledger.conn.iterdump())


def _fail(fn):
    def raiser(*a):
        raise RuntimeError("fn failed")
    return raiser


FAILING_WRITES = {
    "append invalid": lambda v, c: v.append({"creator": "x"}),
    "append duplicate": lambda v, c: v.append({"creator": "x", "url": "u0", "length_seconds": 1}),
    "extend duplicate": lambda v, c: v.extend([{"creator": "x", "url": "new", "length_seconds": 1},
                                               {"creator": "x", "url": "u1", "length_seconds": 1}]),
    "extend invalid": lambda v, c: v.extend([{"creator": "x", "url": "n1", "length_seconds": 1}, {}]),
    "extend int overflow": lambda v, c: v.extend([{"creator": "x", "url": "n1", "length_seconds": 2**64}]),
    "pipeline fn raises": lambda v, c: v.pipe(_fail(None)).to(c).run(),
    "pipeline bad output": lambda v, c: v.pipe(lambda x: {"url": x.url}).to(c).run(),
    "migrate fails": lambda v, c: v.migrate(Cleaned, _fail(None)),
    "set_handled unknown id": lambda v, c: v.set_handled(999),
    "replay unknown consumer": lambda v, c: v.replay("ghost"),
    "full pipeline cycle": lambda v, c: v.source.full_pipeline(v.pipe(lambda x: x).to(v)).run(),
}


@pytest.mark.parametrize("name", list(FAILING_WRITES))
def test_failed_write_changes_nothing(file_source, name):
    videos = file_source.topic("videos", Video, dedup=("url",))
    cleaned = file_source.topic("cleaned", Cleaned, dedup=("url",))
    videos.extend([{"creator": "c", "url": f"u{i}", "length_seconds": 60} for i in range(3)])
    before = dump(file_source)
    with pytest.raises(Exception):  # noqa: B017 - each case raises its own documented error
        FAILING_WRITES[name](videos, cleaned)
    after = [line for line in dump(file_source) if "_minikafka_runs" not in line]
    assert after == [line for line in before if "_minikafka_runs" not in line]
