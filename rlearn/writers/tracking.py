"""``TrackingWriter``: the shared part of the experiment-tracking writers (W&B, MLflow).

A run starts at the first write, or continues when training resumes (its id in the checkpoint and in
``<work_dir>/<kind>_run.json``). Such services cannot delete points, so a resumed run skips the rows already
logged, a row's position being ``(train_iter, envstep, k)`` (``k``: its index among the rows at those steps).
"""

from __future__ import annotations

import abc
import importlib
import json
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from rlearn.config.errors import ConfigError
from rlearn.fileio import atomic_write_bytes
from rlearn.writers.base import ScalarValue, Writer, count, list_of, optional, text
from rlearn.writers.rowfile import Row, plain_number

__all__ = ["TrackingWriter", "MissingExtraError"]

Position = Tuple[int, int, int]


class MissingExtraError(ConfigError):
    """A configured writer's package is missing (a ConfigError: ``rlearn train`` prints the pip command)."""


def require(module: str, extra: str) -> Any:
    """Import ``module`` or raise :class:`MissingExtraError` saying ``pip install 'rlearn[<extra>]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"the {extra} writer needs the '{module}' package: "
                                f"pip install 'rlearn[{extra}]'") from exc


def next_position(last: Optional[Position], step_iter: int, step_env: int) -> Position:
    """The position of a row at (``step_iter``, ``step_env``) written after the row at ``last``."""
    k = last[2] + 1 if last is not None and last[:2] == (step_iter, step_env) else 0
    return step_iter, step_env, k


class TrackingWriter(Writer, abc.ABC):
    """One tracking run, each write a row (see the module doc); ``run_name`` defaults to ``work_dir``'s name.
    Subclasses set :attr:`kind` and implement :meth:`_start`, :meth:`_log_row`, :meth:`_log_config`, :meth:`_finish`."""

    STATE_FIELDS = {"run_id": optional(text), "at": optional(list_of(count, 3))}
    #: the service's package and extra (``wandb``, ``mlflow``); the state file is ``<work_dir>/<kind>_run.json``
    kind = "tracking"

    def __init__(self, work_dir: Union[str, os.PathLike, None] = None, logger: Any = None,
                 run_name: Optional[str] = None) -> None:
        #: the service's package, imported (:class:`MissingExtraError` when it is not installed)
        self.package = require(self.kind, self.kind)
        self.work_dir = Path(work_dir) if work_dir is not None else None
        #: ``<work_dir>/<kind>_run.json``: ``{"run_id": ..., "logged": [train_iter, envstep, k]}``
        self.state_file = self.work_dir / f"{self.kind}_run.json" if self.work_dir is not None else None
        self.logger = logger
        self.run_name = run_name if run_name is not None else (self.work_dir.name if self.work_dir else None)
        #: the run's id once started (or restored from a checkpoint)
        self.run_id: Optional[str] = None
        self._resuming = False
        self._started = False
        self._config: Optional[Mapping[str, Any]] = None
        self._logged: Optional[Position] = None  # last position logged to the service
        self._saved: Optional[Position] = None  # the position in the state file
        self._position: Position = (-1, -1, 0)  # of the last write

    @abc.abstractmethod
    def _start(self, run_id: Optional[str], config: Optional[Mapping[str, Any]]) -> str:
        """Start a new run (``run_id`` None) or continue run ``run_id``; return the run's id."""

    @abc.abstractmethod
    def _log_row(self, row: Row, step_iter: int, step_env: int) -> None:
        """Log the values of one write (None values already removed)."""

    @abc.abstractmethod
    def _log_config(self, config: Mapping[str, Any]) -> None:
        """Record the resolved config in the started run."""

    @abc.abstractmethod
    def _finish(self) -> None:
        """End the run in this process (the service marks it finished); ``OSError`` naming rows it lacks."""

    def _durable_position(self) -> Optional[Position]:
        """The last position the service holds for sure: the last logged, where logging returns once stored."""
        return self._logged

    def _save_state_file(self) -> None:
        position = self._durable_position()
        if self.state_file is None or self.run_id is None or (self.state_file.exists() and self._saved == position):
            return
        state = {"run_id": self.run_id, "logged": list(position) if position else None}
        atomic_write_bytes(self.state_file, json.dumps(state).encode("utf-8"))
        self._saved = position

    def _restore_logged(self) -> None:
        """Resume: the run id (unless the checkpoint gave one) and the last position logged, from the state file."""
        try:
            saved = json.loads(self.state_file.read_text(encoding="utf-8")) if self.state_file else {}
        except (OSError, ValueError):
            saved = {}
        if self.run_id is None:
            self.run_id = saved.get("run_id")
        if saved.get("run_id") == self.run_id and saved.get("logged") and self._logged is None:
            self._logged = tuple(int(v) for v in saved["logged"])  # type: ignore[assignment]

    def _ensure_started(self) -> None:
        if self._started:
            return
        if self._resuming:
            self._restore_logged()
        run_id = self.run_id if self._resuming else None
        self.run_id = self._start(run_id, self._config)
        self._started = True
        if self.logger is not None:
            self.logger.info("%s: %s run %s", type(self).__name__, "continuing" if run_id else "started", self.run_id)
        self._saved = None
        self._save_state_file()

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """Log one row (values that are not None) unless an earlier process already logged this position."""
        self._position = position = next_position(self._position, int(step_iter), int(step_env))
        if self._logged is not None and position <= self._logged:
            return  # logged before the resume
        row = {name: plain_number(value) for name, value in scalars.items() if value is not None}
        self._ensure_started()
        self._log_row(row, position[0], position[1])
        self._logged = position

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        """Nothing (the config goes through :meth:`write_config`)."""

    def write_config(self, config: Mapping[str, Any], step_iter: int) -> None:
        """Record ``config`` as the run's config (starting the run with it if needed)."""
        self._config = config
        if self._started:
            self._log_config(config)
        else:
            self._ensure_started()

    def flush(self) -> None:
        """Keep ``<kind>_run.json`` up to date with the last position logged."""
        if self._started:
            self._save_state_file()

    def close(self) -> None:
        """Finish the run in this process (a later write continues it)."""
        if self._started:
            self._started = False
            self._resuming = True
            try:
                self._finish()
            finally:
                self._save_state_file()

    def state_dict(self) -> Dict[str, Any]:
        """``{"run_id": ..., "at": [train_iter, envstep, k]}``: the run to continue and the last row's position."""
        return {"run_id": self.run_id, "at": list(self._position)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue run ``state["run_id"]``, counting positions from the checkpoint's."""
        self.require_state(state)
        if state.get("run_id"):
            self.run_id = str(state["run_id"])
        if state.get("at"):
            self._position = tuple(int(v) for v in state["at"])  # type: ignore[assignment]
        self._resuming = True

    def rewind(self, step_iter: int, step_env: int) -> None:
        """Resume: continue the same run, skipping the rows already logged (see the module doc)."""
        self._resuming = True
        self._restore_logged()
