"""The terminal progress bar of a training run (env steps, steps/s, last evaluation return): tqdm on stderr,
only on a terminal and unless ``RLEARN_NO_PROGRESS`` is true; stdout lines (the log) are routed around it."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional, TextIO

__all__ = ["ProgressBar", "progress_wanted", "ENV_VAR"]

#: environment variable that turns the bar off
ENV_VAR = "RLEARN_NO_PROGRESS"


def progress_wanted(requested: Optional[bool] = None, stream: Optional[TextIO] = None) -> bool:
    """Whether to show a bar: ``requested`` if given (True still needs a terminal), else on when
    ``stream`` (default stderr) is a terminal and ``RLEARN_NO_PROGRESS`` is not true-ish."""
    if requested is False or os.environ.get(ENV_VAR, "").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _StdoutAroundBar:
    """``sys.stdout`` while the bar is shown: complete lines are written with the bar cleared, then redrawn."""

    def __init__(self, real: TextIO, bar_stream: TextIO) -> None:
        self._real = real
        self._bar_stream = bar_stream
        self._pending = ""

    def write(self, text: str) -> int:
        from tqdm import tqdm

        self._pending += text
        if "\n" in self._pending:
            lines, _, self._pending = self._pending.rpartition("\n")
            with tqdm.external_write_mode(file=self._bar_stream):
                self._real.write(lines + "\n")
                self._real.flush()
        return len(text)

    def flush(self) -> None:
        self._real.flush()  # a partial line waits for its newline

    def drain(self) -> None:
        """Write a pending partial line as it is."""
        if self._pending:
            self._real.write(self._pending)
            self._pending = ""
        self._real.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno...
        return getattr(self._real, name)


class ProgressBar:
    """A tqdm bar over the ``total`` env steps of a run, from ``initial`` (a resumed run), labelled ``desc``; a
    no-op object unless ``enabled`` (:func:`progress_wanted`). A context manager: stdout is routed around the
    bar while it is open."""

    def __init__(self, total: int, initial: int = 0, enabled: bool = False, desc: str = "") -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._stdout: Optional[_StdoutAroundBar] = None
        self._n = int(initial)
        self._total = int(total)
        self._desc = desc

    def __enter__(self) -> "ProgressBar":
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=self._total, initial=min(self._n, self._total), desc=self._desc, unit="step",
                             unit_scale=self._total >= 10_000, dynamic_ncols=True, file=sys.stderr, leave=True)
            self._stdout = _StdoutAroundBar(sys.stdout, sys.stderr)
            sys.stdout = self._stdout  # type: ignore[assignment]
        return self

    def update(self, envstep: int, eval_return: Optional[float] = None) -> None:
        """Move the bar to ``envstep``; show ``eval_return`` (the last evaluation's mean return)."""
        if self._bar is None:
            return
        step = min(int(envstep), self._total)
        if eval_return is not None:
            self._bar.set_postfix(eval_return=f"{eval_return:.4g}", refresh=False)
        if step > self._n:
            self._bar.update(step - self._n)
            self._n = step
        else:
            self._bar.refresh()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Remove the bar and give stdout back (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._stdout is not None:
            self._stdout.drain()
            if sys.stdout is self._stdout:
                sys.stdout = self._stdout._real
            self._stdout = None
