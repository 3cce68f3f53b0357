"""Gzip dumps read by ``dumpfiles.scan`` the same with ISA-L's decompressor and zlib's: the
same content hash and blocks, multi-member files, and the same verdicts on damaged files."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import pytest

from minikafka.errors import InputFileError
from minikafka.util import dumpfiles


@pytest.fixture(params=["isal", "zlib"])
def decompressor(request, monkeypatch):
    if request.param == "zlib":
        monkeypatch.setattr(dumpfiles, "_gzip_zlib", lambda: zlib)
    else:
        pytest.importorskip("isal")
        assert type(dumpfiles._gzip_zlib().decompressobj(wbits=31)).__module__.startswith("isal")
    return request.param


def test_a_multi_member_gzip_dump_gives_the_same_content_and_hash_with_either_decompressor(tmp_path, decompressor):
    text = b"".join(b'{"n": %d}\n' % i for i in range(20000))
    path = tmp_path / "d.jsonl.gz"
    path.write_bytes(gzip.compress(text[:70000], compresslevel=1) + gzip.compress(text[70000:], compresslevel=9))
    seen = []
    scanned = dumpfiles.scan(path, sink=seen.append)
    assert b"".join(seen) == text
    assert scanned.sha256 == hashlib.sha256(text).hexdigest() and scanned.gzip and scanned.has_data
    assert scanned.raw_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("content", "says"), [
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"garbage garbage", "corrupt gzip file"),
    (gzip.compress(b'{"key": "k", "n": 1}\n' * 500, mtime=0)[:-30], "truncated gzip file"),
])
def test_a_damaged_gzip_dump_is_corrupt_or_truncated_with_either_decompressor(tmp_path, decompressor, content, says):
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=f"bad.jsonl.gz: {says}"):
        dumpfiles.scan(path)
