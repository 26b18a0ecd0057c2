"""``TableWriter``: every write as a compact horizontal table in a logger, one block per name prefix
(``learner``, ``collector``: the group over its names, the values below); :func:`parse_table` reads one back.
The layout is described in docs/reading-the-logs.md.
"""

from __future__ import annotations

import logging
import re
import shutil
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tabulate import tabulate

from rlearn.values import check_int
from rlearn.writers.base import ScalarValue, Writer

__all__ = ["TableWriter", "format_value", "horizontal_tables", "column_width", "group_of", "grouped_columns",
           "parse_table", "parse_log_tables", "EMPTY", "GROUP_ORDER", "LAST_GROUPS"]

#: shown for a statistic without a value (an empty window)
EMPTY = "-"
#: group of the names without a ``group/`` prefix
DEFAULT_GROUP = "learner"
#: groups shown first, in this order; other groups follow in the order first seen, then :data:`LAST_GROUPS`
GROUP_ORDER = (DEFAULT_GROUP, "collector", "evaluator")
#: the groups shown last, in this order: the throughput, then the time it leaves out (``time/eval_s``...)
LAST_GROUPS = ("throughput", "time")
_GAP = "  "  # between two columns
_SEP = " | "  # between two groups on one row
_NONFINITE = "_nonfinite"


def format_value(value: Any) -> str:
    """Table text of one value: ints as they are, floats with 5 significant digits (no exponent from 1e5
    to 1e15: ``1234567``), ``None`` as ``-``."""
    if value is None:
        return EMPTY
    if isinstance(value, (bool, int)):
        return str(value)
    value = float(value)
    if 1e5 <= abs(value) < 1e15:  # False for inf and nan, which the "g" format writes as str() does
        return f"{value:.0f}"
    return f"{value:.5g}"


def group_of(name: str) -> Tuple[str, str]:
    """``(group, short name)``: ``("collector", "epsilon_avg")``, ``("learner", "loss_avg")`` for ``loss_avg``."""
    group, sep, rest = name.partition("/")
    return (group, rest) if sep and group and rest else (DEFAULT_GROUP, name)


def grouped_columns(scalars: Mapping[str, ScalarValue],
                    known: Optional[Dict[str, List[str]]] = None) -> List[Tuple[str, List[Tuple[str, str]]]]:
    """``[(group, [(short name, text), ...]), ...]`` of one write, groups in display order; ``known`` (updated):
    per group, the names shown so far, in order (``-`` when missing; never ``<key>_nonfinite``, shown after
    ``<key>_avg``)."""
    known = {} if known is None else known
    groups: Dict[str, Dict[str, ScalarValue]] = {}
    for name, value in scalars.items():
        group, short = group_of(name)
        groups.setdefault(group, {})[short] = value
        if not short.endswith(_NONFINITE):
            names = known.setdefault(group, [])
            if short not in names:
                names.append(short)
    first_seen = [g for g in dict.fromkeys([*known, *groups]) if g not in GROUP_ORDER + LAST_GROUPS]
    order = [*GROUP_ORDER, *first_seen, *LAST_GROUPS]
    out: List[Tuple[str, List[Tuple[str, str]]]] = []
    for group in sorted(groups, key=order.index):
        values = groups[group]
        names: List[str] = []
        for short in known.get(group, []):
            names.append(short)
            if short.endswith("_avg") and short[:-4] + _NONFINITE in values:
                names.append(short[:-4] + _NONFINITE)
        out.append((group, [(short, format_value(values.get(short))) for short in dict.fromkeys([*names, *values])]))
    return out


def column_width(column: Tuple[str, str]) -> int:
    """Characters one ``(name, value)`` column takes in a block: its wider cell plus the gap before it."""
    name, value = column
    return max(len(name), len(value)) + len(_GAP)


def _segment(label: str, columns: List[Tuple[str, str]]) -> Tuple[str, str]:
    """The two lines of one group's columns: ``label  name ...`` over ``       value ...``."""
    body = tabulate([[name for name, _ in columns], [value for _, value in columns]], tablefmt="plain",
                    disable_numparse=True, colalign=("right",) * len(columns))
    header, values = body.split("\n")
    return f"{label}{_GAP}{header}", f"{' ' * len(label)}{_GAP}{values}"


def horizontal_tables(blocks: List[Tuple[str, List[Tuple[str, str]]]], width: int) -> str:
    """Render ``[(group, [(name, value), ...]), ...]`` as rows of two lines (the group and the names, then the
    values) of at most ``width`` characters where possible; a group too wide continues under its label again."""
    label_width = max((len(group) for group, _ in blocks), default=0)
    rows: List[List[Tuple[str, str]]] = []  # each row: its segments (header line, value line)
    row: List[Tuple[str, str]] = []
    used = 0
    for group, columns in blocks:
        chunk: List[Tuple[str, str]] = []
        label = group
        total = sum(column_width(column) for column in columns)
        start = used + len(_SEP) + len(group)  # where its columns begin if the group stays on this row
        if row and (start + total <= width  # all of it fits, or it is too wide for any row and its first column fits
                    or label_width + total > width and start + column_width(columns[0]) <= width):
            used = start
        else:
            if row:
                rows.append(row)
            row, used, label = [], label_width, group.ljust(label_width)
        for column in columns:
            need = column_width(column)
            if chunk and used + need > width:
                row.append(_segment(label, chunk))
                rows.append(row)
                row, chunk, used, label = [], [], label_width, group.ljust(label_width)
            chunk.append(column)
            used += need
        if chunk:
            row.append(_segment(label, chunk))
    if row:
        rows.append(row)
    lines: List[str] = []
    for segments in rows:
        lines.append(_SEP.join(header for header, _ in segments).rstrip())
        lines.append(_SEP.join(values.ljust(len(header)) for header, values in segments).rstrip())
    return "\n".join(lines)


_HEADING = re.compile(r"(?:(?P<group>\S+) at )?train_iter (?P<iter>-?\d+)  envstep (?P<env>-?\d+)$")


def _parse_rows(header: str, values: str, cells: Dict[str, str]) -> None:
    bounds = [0] + [m.start() for m in re.finditer(re.escape(_SEP), header)] + [len(header)]
    for left, right in zip(bounds, bounds[1:]):
        if left:
            left += len(_SEP)
        segment = header[left:right]
        label_end = segment.index(_GAP)
        group = segment[:label_end].strip()
        previous = left + label_end
        for match in re.finditer(r"\S+", values[left:right]):
            end = left + match.end()
            short = header[previous:end].strip()
            cells[short if group == DEFAULT_GROUP else f"{group}/{short}"] = match.group()
            previous = end


def parse_log_tables(text: str) -> List[Dict[str, str]]:
    """Every table of a log (a file, or captured output) in order, each read as :func:`parse_table` does: a
    heading line (after any log prefix) and the pairs of lines after it whose second line starts with a space."""
    lines = text.splitlines()
    tables: List[Dict[str, str]] = []
    index = 0
    while index < len(lines):
        heading = _HEADING.search(lines[index])
        index += 1
        if heading is None:
            continue
        cells = {"train_iter": heading["iter"], "envstep": heading["env"]}
        while index + 1 < len(lines) and lines[index + 1].startswith(" ") and _GAP in lines[index]:
            _parse_rows(lines[index], lines[index + 1], cells)
            index += 2
        tables.append(cells)
    return tables


def parse_table(text: str) -> Dict[str, str]:
    """The first table in ``text`` as ``{"train_iter": ..., "envstep": ..., <full name>: <text>, ...}`` in
    the order shown (names may hold single spaces, not two in a row nor `` | ``); ValueError when there is none."""
    tables = parse_log_tables(text)
    if not tables:
        raise ValueError(f"no table heading ('train_iter N  envstep M') in {text[:200]!r}")
    return tables[0]


class TableWriter(Writer):
    """Logs every write as a compact table (``INFO``) on ``logger``, wrapped to ``width`` characters (None: the
    terminal's at each write, 120 without one); :attr:`last_table` holds the last one ("" before)."""

    def __init__(self, logger: logging.Logger, width: Optional[int] = None) -> None:
        self.logger = logger
        self.width = check_int("TableWriter width", width, 20, optional=True)
        self.last_table = ""
        self._known: Dict[str, List[str]] = {}

    def render(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> str:
        """The text of one write: the heading line and the blocks."""
        width = self.width if self.width is not None else shutil.get_terminal_size((120, 24)).columns
        blocks = grouped_columns(scalars, self._known)
        groups = {group_of(name)[0] if "/" in name else None for name in scalars}
        by = f"{next(iter(groups))} at " if len(groups) == 1 and None not in groups else ""  # one group's write
        return f"{by}train_iter {step_iter}  envstep {step_env}\n{horizontal_tables(blocks, width)}"

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """Log the table of one write."""
        table = self.render(scalars, step_iter, step_env)
        self.logger.info("%s", table)
        self.last_table = table

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        """Log ``text`` under a ``<tag> (train_iter N)`` line."""
        self.logger.info("%s (train_iter %d)\n%s", tag, step_iter, text)
