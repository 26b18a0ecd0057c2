"""``CsvWriter``: ``<work_dir>/metrics.csv``, one row per write under a header that grows.

The header is ``train_iter,envstep,time``, then every name in the order it first appeared (a missing value:
an empty cell); a new name rewrites the file once, atomically, so it is always one table. See docs/writers.md.
"""

from __future__ import annotations

import csv
import io
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from rlearn.writers.base import list_of, optional, text
from rlearn.writers.rowfile import FIRST_COLUMNS, DamagedLine, Entry, Row, RowFileWriter

__all__ = ["CsvWriter", "read_csv"]


def _number(text: str) -> Union[int, float]:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _csv_text(lines: Iterable[List[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(lines)
    return out.getvalue()


class CsvWriter(RowFileWriter):
    """A CSV table whose header (:attr:`columns`, None until read or written) grows with new names."""

    STATE_FIELDS = {**RowFileWriter.STATE_FIELDS, "columns": optional(list_of(text))}
    columns: Optional[List[str]] = None  # each writer sets its own list (never changed in place)

    def parse(self, text: str) -> Tuple[List[Entry], bool]:
        lines = text.split("\n")
        torn = bool(lines.pop())
        if not lines:
            return [], torn
        header = next(csv.reader([lines[0]]))
        if self.columns is None:
            self.columns = header
        return [_parse_row(header, line, number) for number, line in enumerate(lines[1:], start=2) if line], torn

    def _cells(self, row: Row) -> List[str]:
        return [str(row[name]) if name in row else "" for name in self.columns or ()]  # str() of a float is repr()

    def render(self, rows: List[Row]) -> str:
        return _csv_text([self._columns_for(rows), *map(self._cells, rows)])

    def encode_row(self, row: Row) -> str:
        return _csv_text([self._cells(row)])

    def _columns_for(self, rows: List[Row]) -> List[str]:
        """The header, widened by the names of ``rows`` it lacks (in the order they appear)."""
        self.columns = list(dict.fromkeys([*(self.columns or FIRST_COLUMNS), *(name for row in rows for name in row)]))
        return self.columns

    def _before_append(self, row: Row) -> None:
        """Write the header of a new file; widen it (rewriting the file once) when ``row`` has a name it lacks."""
        if self.path.stat().st_size == 0 or self.columns is None or any(name not in self.columns for name in row):
            rows = self.read_rows()
            self._columns_for(rows + [row])
            self._replace(rows)

    def state_dict(self) -> Dict[str, Any]:
        """``{"rows": rows written, "columns": the header}``: what :meth:`rewind` restores."""
        return {**super().state_dict(), "columns": list(self.columns or FIRST_COLUMNS)}

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
