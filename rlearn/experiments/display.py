"""One progress display for a whole experiment: a tqdm bar on stderr (only on a terminal, as the run's own
bar: :func:`rlearn.progress.progress_wanted`) with lines printed above it."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

__all__ = ["ExperimentDisplay", "format_duration"]


def format_duration(seconds: float) -> str:
    """``"42s"``, ``"3m05s"``, ``"1h02m"``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


class ExperimentDisplay:
    """A bar over ``total`` units (env steps of all runs, or trials) and notes printed above it.

    Without a terminal (or with ``RLEARN_NO_PROGRESS=1``, ``enabled=False``) only the notes are printed, to
    stdout, one line each with the time.
    """

    def __init__(self, total: int, desc: str, unit: str = "step", enabled: Optional[bool] = None) -> None:
        from rlearn.progress import progress_wanted

        self.total = int(total)
        self._bar: Any = None
        if progress_wanted(enabled):
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, unit_scale=self.total >= 10_000,
                             dynamic_ncols=True, file=sys.stderr, leave=True)

    def note(self, message: str) -> None:
        """A line above the bar (or on stdout), prefixed with the time."""
        line = f"{time.strftime('%H:%M:%S')} {message}"
        if self._bar is not None:
            self._bar.write(line, file=sys.stdout)
        else:
            print(line, flush=True)

    def update(self, done: int, status: str = "") -> None:
        """Move the bar to ``done`` units and show ``status`` beside it."""
        if self._bar is None:
            return
        done = min(int(done), self.total)
        if status:
            self._bar.set_postfix_str(status, refresh=False)
        if done > self._bar.n:
            self._bar.update(done - self._bar.n)
        else:
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> "ExperimentDisplay":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
