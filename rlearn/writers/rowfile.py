"""``RowFileWriter``: the shared part of the JSON-lines and CSV writers (one row per write, rewound on resume).

Each row holds ``train_iter``, ``envstep``, ``time`` (seconds since the epoch), then every value that is not
None. The checkpoint state is the number of rows, which a resume keeps; a damaged row is skipped with a warning.
"""

from __future__ import annotations

import abc
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from rlearn.fileio import atomic_write_bytes
from rlearn.values import is_int
from rlearn.writers.base import ScalarValue, Writer, count

__all__ = ["RowFileWriter", "Row", "DamagedLine", "plain_number", "FIRST_COLUMNS"]

#: one row: column name -> number
Row = Dict[str, Union[int, float]]
#: the columns every row starts with
FIRST_COLUMNS = ("train_iter", "envstep", "time")
#: the last write's scalars and its wall time (see RowFileWriter._time_of)
_LAST_WRITE: Optional[Tuple[Mapping[str, Any], float]] = None


@dataclass
class DamagedLine:
    """A line of a row file that is not a row (in :meth:`RowFileWriter.parse`'s entries, in its place)."""

    number: int  # 1-based line number in the file
    problem: str


#: what :meth:`RowFileWriter.parse` returns for each line: a row, or the damaged line in its place
Entry = Union[Row, DamagedLine]


def plain_number(value: Any) -> Union[int, float]:
    """``value`` as a Python ``int`` (bools, ints, numpy integers) or ``float`` (anything else numeric)."""
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "item"):  # numpy scalar, one-element tensor
        value = value.item()
        if is_int(value):
            return value
    return float(value)


def _rows(entries: Sequence[Entry]) -> List[Row]:
    return [entry for entry in entries if not isinstance(entry, DamagedLine)]


class RowFileWriter(Writer, abc.ABC):
    """One row per write appended to ``path`` (``time`` from ``clock``; problems reported on ``logger``).
    Subclasses implement :meth:`parse` and :meth:`encode_row`, a format with a header :meth:`render` too."""

    STATE_FIELDS = {"rows": count}
    REQUIRED_STATE = ("rows",)
    #: seconds between two fsyncs in :meth:`flush` (an fsync per log would cost more than the write)
    FSYNC_EVERY_S = 30.0

    def __init__(self, path: Union[str, os.PathLike], logger: Any = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.logger = logger
        self.clock = clock
        #: rows in the file (counted when it is first opened), or the count a checkpoint restored
        self.rows_written: Optional[int] = None
        self._file: Optional[IO[str]] = None
        self._synced_at = time.monotonic()

    @abc.abstractmethod
    def parse(self, text: str) -> Tuple[List[Entry], bool]:
        """The rows of ``text``, a :class:`DamagedLine` for each line that is not one, and whether a damaged
        last row without its newline (a crash mid-write) was left out."""

    def render(self, rows: List[Row]) -> str:
        """The text of a file holding ``rows`` (a format with a header adds it)."""
        return "".join(map(self.encode_row, rows))

    @abc.abstractmethod
    def encode_row(self, row: Row) -> str:
        """One appended row as text, newline included."""

    def _before_append(self, row: Row) -> None:
        """Called before ``row`` is appended (the CSV writer widens its header here)."""

    def _load(self) -> Tuple[Optional[str], List[Entry], bool]:
        """The file's text (None when it does not exist) and what :meth:`parse` makes of it."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None, [], False
        return (text, *self.parse(text))

    def read(self) -> Tuple[List[Row], List[str]]:
        """The rows now in the file and one ``<file>:<line>: ...`` message per damaged line skipped."""
        entries = self._load()[1]
        return _rows(entries), self._damaged(entries, warn=False)

    def read_rows(self) -> List[Row]:
        """The rows now in the file; damaged lines are skipped, each with a warning on the logger."""
        entries = self._load()[1]
        self._damaged(entries)
        return _rows(entries)

    def _damaged(self, entries: Sequence[Entry], warn: bool = True) -> List[str]:
        """One message per damaged line of ``entries``, each a warning on the logger too when ``warn``."""
        problems = [f"{self.path}:{entry.number}: damaged row skipped ({entry.problem}); the rows after it are kept"
                    for entry in entries if isinstance(entry, DamagedLine)]
        if warn and self.logger is not None:
            for problem in problems:
                self.logger.warning("%s", problem)
        return problems

    def _open(self) -> IO[str]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text, entries, torn = self._load()
            rows, problems = _rows(entries), self._damaged(entries)
            if torn or problems or (text and not text.endswith("\n")):  # never append to a half-written last row
                atomic_write_bytes(self.path, self.render(rows).encode("utf-8"))
            if self.rows_written is None:
                self.rows_written = len(rows)
            self._file = open(self.path, "a", encoding="utf-8", newline="")
        return self._file

    def _replace(self, rows: List[Row]) -> None:
        """Replace the file by ``rows`` atomically (an open handle is reopened on the new file)."""
        was_open = self._file is not None
        self.close()
        atomic_write_bytes(self.path, self.render(rows).encode("utf-8"))
        if was_open:
            self._open()

    def _time_of(self, scalars: Mapping[str, ScalarValue]) -> float:
        """The wall time of a write: the same for every row writer handed the same ``scalars`` (JSONL and CSV
        rows agree)."""
        global _LAST_WRITE
        if self.clock is not time.time:
            return round(float(self.clock()), 6)
        if _LAST_WRITE is None or _LAST_WRITE[0] is not scalars:
            _LAST_WRITE = (scalars, round(time.time(), 6))
        return _LAST_WRITE[1]

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """Append one row: ``train_iter``, ``envstep``, ``time``, then every value that is not None."""
        row: Row = {"train_iter": int(step_iter), "envstep": int(step_env), "time": self._time_of(scalars)}
        row.update({name: plain_number(value) for name, value in scalars.items()
                    if value is not None and name not in row})
        self._open()
        self._before_append(row)
        self._open().write(self.encode_row(row))
        self.rows_written = (self.rows_written or 0) + 1

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        """Nothing: a row file holds numbers only (the config is ``<work_dir>/config.py``)."""

    def flush(self, sync: Optional[bool] = None) -> None:
        """Hand what was written to the OS; fsync the file too when ``sync``, or (None) when the last fsync is
        :attr:`FSYNC_EVERY_S` seconds old (a checkpoint and :meth:`close` always fsync)."""
        if self._file is not None:
            self._file.flush()
            if sync or sync is None and time.monotonic() - self._synced_at >= self.FSYNC_EVERY_S:
                os.fsync(self._file.fileno())
                self._synced_at = time.monotonic()

    def close(self) -> None:
        """Flush and close the file; a later write reopens it for appending."""
        if self._file is not None:
            try:
                self.flush(sync=True)
            finally:
                self._file.close()
                self._file = None

    def state_dict(self) -> Dict[str, Any]:
        """``{"rows": rows written so far}``, after an fsync of the file."""
        self.flush(sync=True)
        if self.rows_written is None:
            self.rows_written = len(self.read_rows())
        return {"rows": int(self.rows_written)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the row count of a checkpoint."""
        self.require_state(state)
        self.rows_written = int(state["rows"])

    def rewind(self, step_iter: int, step_env: int) -> None:
        """Drop the rows past the restored row count (without one, as when the writer is new to the run: past
        ``step_iter``) and a damaged last row; a damaged row among those kept goes with a warning but counts."""
        self.close()
        text, entries, torn = self._load()
        if text is None:
            self.rows_written = 0
            return
        if self.rows_written is not None:
            kept_entries = entries[: self.rows_written]
        else:
            kept_entries = [e for e in entries
                            if isinstance(e, DamagedLine) or int(e.get("train_iter", 0)) <= step_iter]
        self._damaged(kept_entries)
        kept = _rows(kept_entries)
        if torn or len(kept) != len(entries) or self.render(kept) != text:
            self._replace(kept)
            if self.logger is not None:
                self.logger.info(
                    "%s: rewound to train_iter=%d envstep=%d: dropped %d row(s) written after the checkpoint%s",
                    self.path.name, step_iter, step_env, len(_rows(entries)) - len(kept),
                    " and a damaged last row" if torn else "",
                )
        self.rows_written = len(kept)
