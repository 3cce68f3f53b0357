"""Rows as CSV or as an aligned text table (``show --csv``, ``show --table``, ``export x.csv``).

Values are written as the JSON output writes them (``common.json_value``: datetimes as
stored, infinite floats as ``Infinity``), nested values (lists, dicts) as JSON text,
booleans as ``true``/``false``, missing values as an empty field.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable

from .common import json_value

TABLE_CELL = 40  # characters a --table cell shows before it is cut with '…'


def cell_text(value) -> str:
    """One value as CSV/table text."""
    value = json_value(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def csv_lines(rows: Iterable[dict], columns: list[str], *, header: bool = True) -> Iterable[str]:
    """CSV text (RFC 4180, ``\\r\\n`` line ends), one chunk per row, the header first."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if header:
        writer.writerow(columns)
        yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([cell_text(row.get(c)) for c in columns])
        yield buffer.getvalue()


def text_table(rows: list[dict], columns: list[str], *, width: int = TABLE_CELL) -> str:
    """An aligned table: a header, a rule, one line per row; long cells cut with '…'.

    Numbers are right-aligned, everything else left-aligned.
    """
    def cut(text: str) -> str:
        text = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", " ")
        return text if len(text) <= width else text[: width - 1] + "…"

    cells = [[cut(cell_text(r.get(c))) for c in columns] for r in rows]
    numeric = [bool(rows) and all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool)
                                  for r in rows if r.get(c) is not None) for c in columns]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line(values) for values in cells]
    return "\n".join(out)
