"""Backfill's dump formats are one table: the names that tell each, how Spark reads it, what
its rows are at the checks, and the CLI's choices all come from it; an unknown one is
refused by its name."""

from __future__ import annotations

import pytest

from minikafka.util.dumpfiles import DUMP_FORMATS, detect_dump_format, dump_format


def test_every_format_is_told_by_each_of_its_names_gzip_or_not_and_nothing_else_is():
    for fmt in DUMP_FORMATS.values():
        for suffix in fmt.suffixes:
            assert detect_dump_format(f"dumps/old{suffix}") == fmt.name
            assert detect_dump_format(f"dumps/old{suffix.upper()}.gz") == fmt.name
    assert detect_dump_format("dumps/old.xml") is None and detect_dump_format("dumps/old.gz") is None


def test_an_unknown_format_is_refused_by_its_name_never_read_as_another():
    with pytest.raises(ValueError, match=r"unknown dump format 'xml': one of jsonl, csv, parquet"):
        dump_format("xml")
    assert {f.reader for f in DUMP_FORMATS.values()} == {"chunks", "csv", "parquet"}


def test_the_backfill_command_offers_exactly_the_formats_of_the_table():
    from minikafka.cli import main

    option = next(p for p in main.commands["backfill"].params if p.name == "fmt")
    assert list(option.type.choices) == list(DUMP_FORMATS)
