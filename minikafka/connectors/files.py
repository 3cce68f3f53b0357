"""JSONLSource: follow a JSON-lines file into a topic (``tail -F`` with a durable position).

Each batch of complete lines is appended in one transaction together with the file's
position (inode, byte offset, line number), so a restart resumes exactly after the last
stored line: nothing twice, nothing skipped. A malformed line goes to the quarantine
with ``file:line`` and the reason, and the stream goes on. Rotation (the file renamed
away and a new one created, or truncated in place) is noticed: the old file is read to
its end, then the new one from its start.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from ..errors import ConnectorError
from ..ledger import windows as stored
from ..util.clock import utc_now
from .intake import parse_message, store_in_current_transaction

log = logging.getLogger("minikafka.connectors")


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
        self.poll = poll
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
        ledger = topic.source._ledger
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
                if self._read_batch(topic, fh):
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
            fh.seek(position["offset"])
            fh.line = position.get("line", 0)
        return fh

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

    def _read_batch(self, topic: Any, fh) -> bool:
        valid, bad = [], []
        start_line = fh.line
        for _ in range(self.batch_lines):
            before = fh.tell()
            raw = fh.readline()
            if not raw:
                break
            if not raw.endswith(b"\n"):  # a line still being written: wait for its end
                fh.seek(before)
                break
            fh.line += 1
            if not raw.strip():
                continue
            self.lines += 1
            model, reason = parse_message(topic, raw)
            if model is None:
                bad.append((raw.decode("utf-8", "replace").strip(), reason, f"{self.path}:{fh.line}"))
            else:
                valid.append(model)
        if fh.line == start_line and fh.tell() == before:
            return False
        ledger = topic.source._ledger
        with ledger.atomic():
            self.appended += store_in_current_transaction(topic, valid, bad)
            self._save(ledger, topic, fh)
        self.quarantined += len(bad)
        return True

    def _save(self, ledger, topic: Any, fh) -> None:
        position = {"inode": None, "offset": 0, "line": 0} if fh is None else \
            {"inode": fh.inode, "offset": fh.tell(), "line": fh.line}
        with ledger.atomic() as conn:
            stored.save_position_in_current_transaction(conn, self.key, topic.name, position, utc_now())


class _Followed:
    """An open file with the inode it was opened under and the number of lines consumed."""

    def __init__(self, raw, inode: int):
        self.raw = raw
        self.inode = inode
        self.line = 0

    def __getattr__(self, name: str):
        return getattr(self.raw, name)
