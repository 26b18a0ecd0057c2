"""``JsonlWriter``: ``<work_dir>/metrics.jsonl``, one JSON object per write (a periodic log or an evaluation).

A statistic without a value is absent from its line (never 0, never null); non-finite numbers are written
as ``json`` writes them (``NaN``, ``Infinity``). ``rlearn plot`` reads this file. See docs/writers.md.
"""

from __future__ import annotations

import json
from typing import List, Tuple

from rlearn.writers.rowfile import DamagedLine, Entry, Row, RowFileWriter

__all__ = ["JsonlWriter", "read_jsonl"]


class JsonlWriter(RowFileWriter):
    """One JSON object per line (see the module doc); rewound on resume (:meth:`RowFileWriter.rewind`)."""

    def parse(self, text: str) -> Tuple[List[Entry], bool]:
        lines = text.split("\n")
        tail = lines.pop()  # "" when the text ends with a newline
        entries = [_parse_line(line, number) for number, line in enumerate(lines, start=1) if line.strip()]
        last = _parse_line(tail, len(lines) + 1) if tail.strip() else None
        if isinstance(last, dict):  # a last line without its newline is complete if it parses
            entries.append(last)
        return entries, isinstance(last, DamagedLine)

    def encode_row(self, row: Row) -> str:
        return json.dumps(row, separators=(", ", ": ")) + "\n"


def _parse_line(line: str, number: int) -> Entry:
    try:
        row = json.loads(line)
    except ValueError as exc:
        return DamagedLine(number, f"not JSON: {exc}")
    return row if isinstance(row, dict) else DamagedLine(number, f"a JSON {type(row).__name__}, not an object")


def read_jsonl(path, logger=None) -> List[Row]:
    """The rows of a ``metrics.jsonl`` file. A damaged last line (what a crash mid-write leaves) is skipped;
    so is a damaged line in the middle, with a warning on ``logger`` naming the file and the line."""
    return JsonlWriter(path, logger=logger).read_rows()
