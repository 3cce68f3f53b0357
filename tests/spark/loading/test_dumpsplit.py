"""The chunk writer: line-aligned chunks whose first lines number every line of the dump exactly."""

from __future__ import annotations

import pytest

from minikafka.spark.loading.dumpsplit import ChunkWriter


def lines_of(chunks) -> list[tuple[int, bytes]]:
    out = []
    for chunk in chunks:
        data = open(chunk.uri.removeprefix("file://"), "rb").read()
        parts = data.split(b"\n")
        if data.endswith(b"\n"):
            parts = parts[:-1]
        assert len(parts) == chunk.lines
        out += [(chunk.first_line + k, line) for k, line in enumerate(parts)]
    return out


@pytest.mark.parametrize("block", [1, 7, 64, 1000])
@pytest.mark.parametrize("tail", [b"\n", b""])
def test_chunks_end_at_line_breaks_and_number_every_line(tmp_path, block, tail):
    lines = [b'{"n": %d}' % i if i % 5 else b"" for i in range(300)] + [b"x" * 500]  # blank lines, one long line
    content = b"\n".join(lines) + tail
    writer = ChunkWriter(f"file://{tmp_path}/chunks", chunk_bytes=200)
    for i in range(0, len(content), block):
        writer.feed(content[i:i + block])
    chunks = writer.close()
    assert len(chunks) >= 10
    assert sum(c.size for c in chunks) == len(content)
    assert lines_of(chunks) == list(enumerate(lines, start=1))
    for chunk in chunks[:-1]:
        assert open(chunk.uri.removeprefix("file://"), "rb").read().endswith(b"\n")


def test_an_empty_feed_writes_no_chunk(tmp_path):
    writer = ChunkWriter(f"file://{tmp_path}/chunks", chunk_bytes=200)
    writer.feed(b"")
    assert writer.close() == []

