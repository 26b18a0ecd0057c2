"""``TableWriter``: every write as a horizontal table (names across, values below) in a logger.

A write of ``{"loss_avg": 5.5, "aux_avg": None}`` at train iteration 10 and env step 70 logs::

    train_iter 10
    +--------------+-----------+------------+-----------+
    |   train_iter |   envstep |   loss_avg |   aux_avg |
    +==============+===========+============+===========+
    |           10 |        70 |        5.5 |         - |
    +--------------+-----------+------------+-----------+

A wide table is split into several tables that each fit the terminal width (columns keep their order).
``None`` shows as ``-``. A write whose names all belong to one group (``evaluator/...``) is headed by
that group (``evaluator at train_iter 10``) instead of ``train_iter 10``. See docs/reading-the-logs.md.
"""

from __future__ import annotations

import logging
import math
import shutil
from typing import Any, List, Mapping, Optional, Tuple

from tabulate import tabulate

from rlearn.writers.base import ScalarValue, Writer

__all__ = ["TableWriter", "format_value", "horizontal_tables", "column_width", "EMPTY"]

#: shown for a statistic without a value (an empty window)
EMPTY = "-"


def format_value(value: Any) -> str:
    """Table text of one value: ints as they are, floats with 6 significant digits, None as ``-``."""
    if value is None:
        return EMPTY
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.6g}"


def _grid(columns: List[Tuple[str, str]]) -> str:
    return tabulate(
        [[value for _, value in columns]],
        headers=[name for name, _ in columns],
        tablefmt="grid",
        disable_numparse=True,
        stralign="right",
    )


def column_width(column: Tuple[str, str]) -> int:
    """Characters one ``(name, value)`` column takes in a grid table: its cells plus one border.

    ASCII text is measured directly, as tabulate's grid format draws it (a header gets two characters of
    minimum padding; then a space on each side and the border); other text is rendered with tabulate,
    which knows wide characters.
    """
    name, value = column
    if name.isascii() and value.isascii():
        return max(len(name) + 2, len(value)) + 3
    return len(_grid([column]).split("\n", 1)[0]) - 1


def horizontal_tables(columns: List[Tuple[str, str]], width: int) -> str:
    """Render ``(name, value)`` columns as grid tables of one row, as many as needed to fit ``width``.

    Columns keep their order and are cut into consecutive groups by their rendered widths
    (:func:`column_width`). A column wider than ``width`` on its own gets a table of its own.
    """
    chunks: List[List[Tuple[str, str]]] = []
    current: List[Tuple[str, str]] = []
    used = 1  # the left border
    for column in columns:
        need = column_width(column)
        if current and used + need > width:
            chunks.append(current)
            current, used = [], 1
        current.append(column)
        used += need
    if current:
        chunks.append(current)
    return "\n".join(_grid(chunk) for chunk in chunks)


class TableWriter(Writer):
    """Logs every write as horizontal grid tables (``INFO``), wrapped to ``width``.

    Args:
        logger: where the tables go (the run's logger: terminal and ``<exp_name>.log``).
        width: table width in characters; None uses the terminal width at each write
            (``shutil.get_terminal_size``, 120 when there is no terminal).

    Attributes:
        last_table: the text of the last table written ("" before the first).
    """

    def __init__(self, logger: logging.Logger, width: Optional[int] = None) -> None:
        if width is not None and (isinstance(width, bool) or not isinstance(width, int) or width < 20):
            raise ValueError(f"TableWriter width must be an int >= 20 or None, got {width!r}")
        self.logger = logger
        self.width = width
        self.last_table = ""

    def columns(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> List[Tuple[str, str]]:
        """``(name, text)`` columns of one write: ``train_iter``, ``envstep``, then the scalars in order."""
        columns = [("train_iter", str(step_iter)), ("envstep", str(step_env))]
        columns += [(name, format_value(value)) for name, value in scalars.items()]
        return columns

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """Log the table of one write (see the module docstring for the layout)."""
        width = self.width if self.width is not None else shutil.get_terminal_size((120, 24)).columns
        table = horizontal_tables(self.columns(scalars, step_iter, step_env), width)
        groups = {name.partition("/")[0] if "/" in name else None for name in scalars}
        group = next(iter(groups)) if len(groups) == 1 else None
        heading = f"{group} at train_iter {step_iter}" if group else f"train_iter {step_iter}"
        self.logger.info("%s\n%s", heading, table)
        self.last_table = table

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        """Log ``text`` under a ``<tag> (train_iter N)`` line."""
        self.logger.info("%s (train_iter %d)\n%s", tag, step_iter, text)
