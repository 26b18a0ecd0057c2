"""``CsvWriter``: ``<work_dir>/metrics.csv``, one row per write under a header that grows.

The header is ``train_iter,envstep,time`` and then every name in the order it first appeared. A value
missing from a write (an empty window, an evaluation row without the learner's columns) is an empty cell.
When a write brings a name the header does not have yet, the file is rewritten once with the wider header
(atomically: temporary file, fsync, rename), the earlier rows getting empty cells in the new column; after
that rows are appended again. So the file is always one valid CSV table that ``csv.DictReader`` (or
pandas) reads whole. New names appear in the first logs of a run (declared keys show from the first log
on), so rewrites are rare and cheap. On resume the header and the rows are rewound to the checkpoint.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from rlearn.writers.base import list_of, optional, text
from rlearn.writers.rowfile import FIRST_COLUMNS, DamagedLine, Entry, Row, RowFileWriter

__all__ = ["CsvWriter", "read_csv"]


def _number(text: str) -> Union[int, float]:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _cell(value: Union[int, float]) -> str:
    return repr(value) if isinstance(value, float) else str(value)


class CsvWriter(RowFileWriter):
    """A CSV table whose header grows when a new name appears (see the module doc).

    Attributes:
        columns: the header (None until the file was read or first written).
    """

    STATE_FIELDS = {**RowFileWriter.STATE_FIELDS, "columns": optional(list_of(text))}

    def __init__(self, path: Union[str, os.PathLike], logger: Any = None, **kwargs: Any) -> None:
        super().__init__(path, logger=logger, **kwargs)
        self.columns: Optional[List[str]] = None

    # ------------------------------------------------------------------------------------- format
    def parse(self, text: str) -> Tuple[List[Entry], bool]:
        lines = text.split("\n")
        tail = lines.pop()
        torn = bool(tail)
        if not lines:
            return [], torn
        header = next(csv.reader([lines[0]]))
        entries: List[Entry] = []
        for number, line in enumerate(lines[1:], start=2):
            if line:
                entries.append(_parse_row(header, line, number))
        if self.columns is None:
            self.columns = header
        return entries, torn

    def render(self, rows: List[Row]) -> str:
        columns = self._columns_for(rows)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row[name]) if name in row else "" for name in columns])
        return out.getvalue()

    def encode_row(self, row: Row) -> str:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(
            [_cell(row[name]) if name in row else "" for name in self.columns or ()]
        )
        return out.getvalue()

    def _columns_for(self, rows: List[Row]) -> List[str]:
        columns = list(self.columns or FIRST_COLUMNS)
        known = set(columns)
        for row in rows:
            for name in row:
                if name not in known:
                    known.add(name)
                    columns.append(name)
        self.columns = columns
        return columns

    def _before_append(self, row: Row) -> None:
        """Widen the header (rewriting the file once) when ``row`` has a name it lacks; write the header of
        a new file."""
        empty = self.path.stat().st_size == 0
        if empty or self.columns is None or any(name not in self.columns for name in row):
            rows = self.read_rows()
            self._columns_for(rows + [row])
            self._replace(rows)

    # ------------------------------------------------------------------------------------- state
    def state_dict(self) -> Dict[str, Any]:
        """``{"rows": rows written, "columns": the header}``: what :meth:`rewind` restores."""
        state = super().state_dict()
        state["columns"] = list(self.columns or FIRST_COLUMNS)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        if state.get("columns") is not None:
            self.columns = [str(name) for name in state["columns"]]


def _parse_row(header: List[str], line: str, number: int) -> Entry:
    try:
        cells = next(csv.reader([line]))
        if len(cells) > len(header):
            return DamagedLine(number, f"{len(cells)} cells under a header of {len(header)}")
        return {name: _number(cell) for name, cell in zip(header, cells) if cell != ""}
    except (ValueError, csv.Error) as exc:
        return DamagedLine(number, f"not a row of numbers: {exc}")


def read_csv(path) -> List[Dict[str, str]]:
    """The rows of a ``metrics.csv`` as ``csv.DictReader`` gives them (strings; ``""`` for a missing value)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
