"""``JsonlWriter``: ``<work_dir>/metrics.jsonl``, one JSON object per write.

Each line is one write of the metric path (a periodic log or an evaluation)::

    {"train_iter": 100, "envstep": 100, "time": 1795555943.39, "loss_avg": 1.5, "collector/episode_return_avg": -1203.4}

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
        torn = False
        if tail.strip():  # a last line without its newline: complete if it parses, else what a crash left
            last = _parse_line(tail, len(lines) + 1)
            torn = isinstance(last, DamagedLine)
            if not torn:
                entries.append(last)
        return entries, torn

    def encode_row(self, row: Row) -> str:
        return json.dumps(row, separators=(", ", ": ")) + "\n"


def _parse_line(line: str, number: int) -> Entry:
    try:
        row = json.loads(line)
    except ValueError as exc:
        return DamagedLine(number, f"not JSON: {exc}")
    if not isinstance(row, dict):
        return DamagedLine(number, f"a JSON {type(row).__name__}, not an object")
    return row


def read_jsonl(path, logger=None) -> List[Row]:
    """The rows of a ``metrics.jsonl`` file. A damaged last line (what a crash mid-write leaves) is skipped;
    so is a damaged line in the middle, with a warning on ``logger`` naming the file and the line."""
    return JsonlWriter(path, logger=logger).read_rows()
