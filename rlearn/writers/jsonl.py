"""``JsonlWriter``: ``<work_dir>/metrics.jsonl``, one JSON object per write.

Each line is one write of the metric path (a periodic log or an evaluation)::

    {"train_iter": 100, "envstep": 100, "time": 1795555943.39, "loss_avg": 1.5, "collector/episode_return_avg": -1203.4}
    {"train_iter": 100, "envstep": 100, "time": 1795555944.02, "evaluator/episode_return_mean": -1180.2, ...}

``train_iter`` and ``envstep`` are the two x axes, ``time`` the wall clock (seconds since the epoch); then
every statistic that has a value, under its final name. A statistic without a value in its window is
absent from the line (never 0, never null). Non-finite evaluation numbers are written as Python's ``json``
writes them (``NaN``, ``Infinity``), which ``json.loads`` reads back. ``rlearn plot`` reads this file.
"""

from __future__ import annotations

import json
from typing import List, Tuple

from rlearn.writers.rowfile import Row, RowFileWriter

__all__ = ["JsonlWriter", "read_jsonl"]


class JsonlWriter(RowFileWriter):
    """One JSON object per line (see the module doc); rewound on resume (:meth:`RowFileWriter.rewind`)."""

    def parse(self, text: str) -> Tuple[List[Row], bool]:
        rows: List[Row] = []
        lines = text.split("\n")
        tail = lines.pop()  # "" when the text ends with a newline
        damaged = bool(tail.strip())
        for line in lines:
            if line.strip():
                rows.append(json.loads(line))
        if damaged:  # a last line without its newline: complete if it parses, else what a crash left
            try:
                rows.append(json.loads(tail))
                damaged = False
            except json.JSONDecodeError:
                pass
        return rows, damaged

    def render(self, rows: List[Row]) -> str:
        return "".join(self.encode_row(row) for row in rows)

    def encode_row(self, row: Row) -> str:
        return json.dumps(row, separators=(", ", ": ")) + "\n"


def read_jsonl(path) -> List[Row]:
    """The rows of a ``metrics.jsonl`` file (a damaged last line, what a crash mid-write leaves, is skipped)."""
    return JsonlWriter(path).read_rows()
