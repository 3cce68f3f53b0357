"""export to what the path names: '-' is standard output, a symlink's target is replaced (the
link stays), a FIFO is streamed to its reader, a socket is refused, /dev/stdout appends.

No test here touches the real /dev/stdout or /dev/null: links live in tmp_path."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading

import pyarrow.parquet as pq
import pytest

from tests.cli.helpers import invoke, seed


def export(db_path, path, fmt="jsonl"):
    return invoke("export", "items", "--format", fmt, path, "--source", db_path)


def urls_of_jsonl(data: bytes) -> list[str]:
    return [json.loads(line)["url"] for line in data.decode().splitlines()]


def test_export_through_a_symlink_replaces_its_target_and_keeps_the_link(db_path, tmp_path):
    seed(db_path, n=3)
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    out = export(db_path, link)
    assert out.exit_code == 0, out.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert urls_of_jsonl(target.read_bytes()) == ["u0", "u1", "u2"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_export_through_a_dangling_symlink_creates_its_target(db_path, tmp_path):
    seed(db_path, n=2)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(tmp_path / "new.jsonl")
    assert export(db_path, link).exit_code == 0
    assert link.is_symlink() and urls_of_jsonl((tmp_path / "new.jsonl").read_bytes()) == ["u0", "u1"]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_to_a_fifo_streams_to_its_reader_and_leaves_the_fifo(db_path, tmp_path, fmt):
    seed(db_path, n=3)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    out = export(db_path, fifo, fmt)
    reader.join(timeout=30)
    assert out.exit_code == 0, out.output
    data = received[0]
    urls = urls_of_jsonl(data) if fmt == "jsonl" else pq.read_table(io.BytesIO(data)).column("url").to_pylist()
    assert urls == ["u0", "u1", "u2"]
    assert fifo.is_fifo()  # still the pipe, not a regular file renamed over it


def test_export_to_a_fifo_whose_reader_leaves_early_is_an_error_naming_it(db_path, tmp_path):
    seed(db_path, n=3000)  # more than a pipe buffer holds
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def read_a_little():
        with open(fifo, "rb") as fh:
            fh.read(100)

    reader = threading.Thread(target=read_a_little)
    reader.start()
    out = export(db_path, fifo)
    reader.join(timeout=30)
    assert out.exit_code == 1, out.output
    assert f"{fifo}: cannot write: Broken pipe" in out.output and "Traceback" not in out.output
    assert fifo.is_fifo()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_dash_writes_to_standard_output_and_the_summary_to_stderr(db_path, tmp_path, fmt):
    seed(db_path, n=3)
    out = export(db_path, "-", fmt)
    assert out.exit_code == 0, out.output
    data = out.stdout_bytes
    urls = urls_of_jsonl(data) if fmt == "jsonl" else pq.read_table(io.BytesIO(data)).column("url").to_pylist()
    assert urls == ["u0", "u1", "u2"]
    assert "exported 3 row(s) of items to standard output" in out.stderr
    assert not (tmp_path / "-").exists()


def test_export_to_a_socket_is_refused_naming_it(db_path, tmp_path, monkeypatch):
    seed(db_path, n=1)
    monkeypatch.chdir(tmp_path)  # a short socket path
    sock = socket.socket(socket.AF_UNIX)
    sock.bind("s.sock")
    try:
        out = export(db_path, "s.sock")
    finally:
        sock.close()
    assert out.exit_code == 1 and "s.sock is a socket" in out.output, out.output
    assert (tmp_path / "s.sock").is_socket()


def test_export_to_a_link_to_its_own_standard_output_appends_to_it(db_path, tmp_path):
    """/dev/stdout as root once got replaced by a regular file; here a link in tmp_path to
    /proc/self/fd/1 stands in for it, and the output file was opened for appending (>>)."""
    seed(db_path, n=2)
    link = tmp_path / "stdout-link"
    link.symlink_to("/proc/self/fd/1")
    captured = tmp_path / "captured.jsonl"
    captured.write_text("")
    with open(captured, "ab") as fh:
        fh.write(b'{"url": "before"}\n')
        fh.flush()
        done = subprocess.run([sys.executable, "-m", "minikafka.cli", "export", "items", "--format", "jsonl",
                               str(link), "--source", db_path], stdout=fh, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr
    assert "exported 2 row(s)" in done.stderr
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert urls_of_jsonl(captured.read_bytes()) == ["before", "u0", "u1"]
