"""JSONLSource: follow a JSON-lines file into a topic (``tail -F`` with a durable position).

Each batch of complete lines is appended in one transaction together with the file's
position (inode, byte offset, line number, a fingerprint of the file's first bytes), so
a restart resumes exactly after the last stored line: nothing twice, nothing skipped. A
malformed line, or one holding a value the ledger refuses (NaN, infinity), goes to the
quarantine with ``file:line`` and the reason, and the stream goes on.

A line without its newline is still being written while following, and waits. Without
``follow``, the end of the file is the end of the input: a final line without a newline
is a line (unless it is JSON cut short, ``{"a": 1`` being written right now: that one
waits for the next run).

The file changing under the reader is noticed:

- renamed away and a new one created (logrotate's ``create``): the old file is read to
  its end (its final line too, newline or not), then the new one from its start;
- truncated in place (``copytruncate``), even when more lines were written than before
  within one poll: the file is smaller than the position, or its first bytes are no
  longer the ones read, so it is read again from its start. The same checks on the
  stored position make a restart read a file replaced meanwhile from its start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import ConnectorError
from ..ledger.consuming import windows as stored
from ..util.clock import utc_now
from ..util.duration import parse_duration
from .batches import Incoming, parse_json_message, store_batch

log = logging.getLogger("minikafka.connectors")

HEAD_BYTES = 4096  # the fingerprint covers the file's first bytes read so far, up to this many


class JSONLSource:
    """Append every line of a JSONL file to a topic; with ``follow``, keep tailing it.

    Args:
        path: the file.
        follow: keep waiting for new lines (and survive rotation); False stops at the end.
        poll: seconds between looks at the file when there is nothing new.
        batch_lines: lines per transaction.

    Attributes:
        lines, appended, quarantined: counts since ``stream()`` started.
    """

    def __init__(self, path: str | os.PathLike, *, follow: bool = True, poll: float = 0.2, batch_lines: int = 1000):
        self.path = Path(path)
        self.follow = follow
        self.poll = parse_duration(poll, what="poll")
        if isinstance(batch_lines, bool) or not isinstance(batch_lines, int) or batch_lines < 1:
            raise ConnectorError(f"batch_lines must be a positive integer, got {batch_lines!r}")
        self.batch_lines = batch_lines
        self.lines = self.appended = self.quarantined = 0
        self._cancel = threading.Event()

    def __repr__(self) -> str:
        return f"JSONLSource({str(self.path)!r}, follow={self.follow})"

    @property
    def key(self) -> str:
        return f"jsonl:{self.path.resolve()}"

    def cancel(self) -> None:
        self._cancel.set()

    def stream(self, topic: Any) -> None:
        """Read (and with follow, tail) the file into ``topic`` until the end or ``cancel()``.

        Raises:
            ConnectorError: the file does not exist (without follow).
        """
        ledger = topic.source.ledger
        fh = None
        try:
            while not self._cancel.is_set():
                if fh is None:
                    fh = self._open(ledger)
                    if fh is None:
                        if not self.follow:
                            raise ConnectorError(f"{self.path}: no such file")
                        self._cancel.wait(self.poll)
                        continue
                if fh.rewritten():
                    log.info("%s was truncated or rewritten in place: reading it from its start", self.path)
                    fh.restart()
                # the end of the input: no follow, or (following) the file was renamed away
                if self._read_batch(topic, fh, at_end=not self.follow or self._renamed_away(fh)):
                    continue
                if not self.follow:
                    return
                if self._rotated(fh):
                    log.info("%s was rotated: reading the new file from its start", self.path)
                    fh.close()
                    fh = None
                    self._save(ledger, topic, None)
                    continue
                self._cancel.wait(self.poll)
        finally:
            if fh is not None:
                fh.close()

    # -- internals ----------------------------------------------------------------------
    def _open(self, ledger):
        try:
            raw = open(self.path, "rb")  # noqa: SIM115 (kept open while following)
        except FileNotFoundError:
            return None
        st = os.fstat(raw.fileno())
        fh = _Followed(raw, st.st_ino)
        position = stored.read_position(ledger.conn, self.key)
        if position and position.get("inode") == st.st_ino and position.get("offset", 0) <= st.st_size:
            head_len = position.get("head_len")
            if head_len is None or _digest(os.pread(raw.fileno(), head_len, 0)) == position.get("head"):
                fh.seek(position["offset"])
                fh.line = position.get("line", 0)
                fh.open_line = bool(position.get("open_line"))
                fh.head = os.pread(raw.fileno(), head_len or 0, 0)
            else:
                log.info("%s was rewritten since the last run: reading it from its start", self.path)
        return fh

    def _renamed_away(self, fh) -> bool:
        try:
            return os.stat(self.path).st_ino != fh.inode
        except FileNotFoundError:
            return False

    def _rotated(self, fh) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # renamed away, the new file is not there yet: keep the old one
        if st.st_ino != fh.inode:
            rest = fh.read(1)
            if rest:  # lines written to the old file after the rename: read them first
                fh.seek(-1, os.SEEK_CUR)
                return False
            return True
        return st.st_size < fh.tell()  # truncated in place

    def _read_batch(self, topic: Any, fh, *, at_end: bool) -> bool:
        """Store up to ``batch_lines`` lines; False when there was nothing to store."""
        incoming = []
        start = fh.tell()
        for _ in range(self.batch_lines):
            before = fh.tell()
            raw = fh.readline()
            if not raw:
                break
            terminated = raw.endswith(b"\n")
            if not terminated and not (at_end and _finished(raw)):
                fh.seek(before)  # a line still being written: wait for its end
                break
            if fh.open_line and raw in (b"\n", b"\r\n"):
                fh.open_line = False  # the newline of a final line stored without it last time
                continue
            fh.open_line = not terminated
            fh.line += 1
            if not raw.strip():
                continue
            self.lines += 1
            model, reason = parse_json_message(topic, raw)
            incoming.append(Incoming(model, raw.decode("utf-8", "replace").strip(), reason, f"{self.path}:{fh.line}"))
        if fh.tell() == start:
            return False
        fh.note_head()
        appended, quarantined = store_batch(topic, incoming,
                                            lambda conn: self._save_in_current_transaction(conn, topic, fh))
        self.appended += appended
        self.quarantined += quarantined
        return True

    def _save(self, ledger, topic: Any, fh) -> None:
        with ledger.atomic() as conn:
            self._save_in_current_transaction(conn, topic, fh)

    def _save_in_current_transaction(self, conn, topic: Any, fh) -> None:
        position = {"inode": None, "offset": 0, "line": 0} if fh is None else {
            "inode": fh.inode, "offset": fh.tell(), "line": fh.line, "open_line": fh.open_line,
            "head": _digest(fh.head), "head_len": len(fh.head)}
        stored.save_position_in_current_transaction(conn, self.key, topic.name, position, utc_now())


def _finished(raw: bytes) -> bool:
    """A final line without its newline is whole unless it is JSON cut short at its end."""
    try:
        json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return exc.end < len(raw)  # a character cut in half at the end is still being written
    except json.JSONDecodeError as exc:
        return exc.pos < len(exc.doc.rstrip())  # broken in the middle: a bad line, not an unfinished one
    return True


def _digest(head: bytes) -> str:
    return hashlib.sha256(head).hexdigest()


class _Followed:
    """An open file with the inode it was opened under, the lines consumed, and its first
    bytes as they were read (to notice the file being truncated and written again)."""

    def __init__(self, raw, inode: int):
        self.raw = raw
        self.inode = inode
        self.line = 0
        self.open_line = False  # the last line consumed had no newline (the end of the file)
        self.head = b""

    def __getattr__(self, name: str):
        return getattr(self.raw, name)

    def note_head(self) -> None:
        """Remember the file's first bytes up to what was read (at most ``HEAD_BYTES``)."""
        want = min(HEAD_BYTES, self.raw.tell())
        if len(self.head) < want:
            self.head = os.pread(self.raw.fileno(), want, 0)

    def rewritten(self) -> bool:
        """The file is shorter than what was read, or its first bytes changed (copytruncate)."""
        size = os.fstat(self.raw.fileno()).st_size
        if size < self.raw.tell():
            return True
        return bool(self.head) and os.pread(self.raw.fileno(), len(self.head), 0) != self.head

    def restart(self) -> None:
        self.raw.seek(0)
        self.line = 0
        self.open_line = False
        self.head = b""
