"""The documented ingest examples without a pipeline file (docs/reference/cli-conventions.md) give rss.items the
same dedup key as the pipeline."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from minikafka import Source

from .helpers import invoke

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "cli-conventions.md"


def _stdin_ingest_examples() -> list[list[str]]:
    commands = []
    for line in PAGE.read_text().splitlines():
        if line.startswith("cat examples/feed.jsonl | minikafka ingest"):
            command = line.split("|", 1)[1].split("#", 1)[0]
            commands.append(shlex.split(command)[1:])  # without "minikafka"
    return commands


def _feed() -> str:
    return "".join(json.dumps({"url": f"https://example.com/{i}", "feed": "ex", "title": f"t{i}", "body": "b",
                               "published": "2026-01-01T00:00:00Z"}) + "\n" for i in range(3))


def test_documented_stdin_ingest_examples_declare_the_pipelines_dedup_key():
    examples = _stdin_ingest_examples()
    assert len(examples) == 2
    for args in examples:
        assert "--model" in args and args[args.index("--dedup") + 1] == "url", args


def test_running_both_documented_stdin_ingest_examples_does_not_duplicate_rows(tmp_path):
    db = tmp_path / "new" / "ledger.sqlite"
    first, second = _stdin_ingest_examples()
    first = [str(db) if a == "new/ledger.sqlite" else a for a in first]
    out = invoke(*first, input=_feed())
    assert out.exit_code == 0, out.output
    out = invoke(*second, input=_feed(), env={"MINIKAFKA_SOURCE": str(db)})
    assert out.exit_code == 0, out.output
    assert "0 appended, 3 duplicates" in out.output
    with Source(db, read_only=True) as src:
        assert src.layout("rss.items").dedup == ("url",)
        assert src.layout("rss.items").dedup == tuple(_pipeline_dedup())


def _pipeline_dedup() -> list[str]:
    text = (ROOT / "conf" / "homelab.toml").read_text()
    block = re.search(r'\[topics\."rss\.items"\]\n(.*?)\n\n', text, re.S).group(1)
    return json.loads(re.search(r"dedup = (\[.*\])", block).group(1))
