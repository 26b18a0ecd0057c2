"""``WandbWriter``: Weights & Biases (``pip install 'rlearn[wandb]'``).

Every write is one ``run.log`` of ``train_iter``, ``envstep`` and every value that is not None, over the
``envstep`` axis; the resolved config is the run's config; a resume continues the same run.

W&B's service writes each run's transaction log (``run-<id>.wandb``) in 32 KiB blocks and reports no write
error, so a row counts as logged only once W&B's own reader finds it in that file (:class:`TransactionLog`):
a checkpoint keeps the rows not read back yet, and a resumed run logs those the logs lack. See docs/writers.md.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from rlearn.writers.base import count, list_of, optional
from rlearn.writers.rowfile import Row
from rlearn.writers.tracking import Position, TrackingWriter, next_position

__all__ = ["WandbWriter", "TransactionLog", "LogUnreadable", "last_position", "next_step", "transaction_logs"]

Axes = Tuple[int, int]
Pending = Tuple[Position, Row]  # a row handed to W&B, not read back yet


class LogUnreadable(ImportError):
    """This wandb has no reader for its transaction logs."""


def _records(path: Path, offset: int = 0) -> Iterator[Tuple[int, Any]]:
    """``(offset after it, record)`` of each complete record of a transaction log from ``offset`` on."""
    try:
        from wandb.proto import wandb_internal_pb2
        from wandb.sdk.internal import datastore
    except ImportError as exc:  # a wandb without the reader: the caller falls back to its own bookkeeping
        raise LogUnreadable(f"this wandb cannot read its transaction logs ({exc})") from exc
    store = datastore.DataStore()
    try:
        store.open_for_scan(str(path))
        if offset:
            store.seek(offset)
        while (data := store.scan_data()) is not None:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            yield store.get_offset(), record
    except (AssertionError, OSError, ValueError):  # the header or a block being written, or damage: stop there
        pass
    finally:
        store.close()


def _row_axes(record: Any) -> Optional[Axes]:
    """``(train_iter, envstep)`` of a history row that has both (rows logged by other code may not)."""
    if record.WhichOneof("record_type") != "history":
        return None
    values = {item.key or "/".join(item.nested_key): item.value_json  # newer W&B versions fill nested_key only
              for item in record.history.item}
    try:
        return int(json.loads(values["train_iter"])), int(json.loads(values["envstep"]))
    except (KeyError, ValueError):
        return None


class TransactionLog:
    """Reads the rows of one transaction log (``run-<id>.wandb``, perhaps not there yet) as W&B writes it."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self.offset = 0  # where the next unread record starts (0: the file's header is not read yet)

    def new_rows(self) -> List[Axes]:
        """``(train_iter, envstep)`` of the rows written since the last call (a record being written: next time)."""
        if not self.path.is_file() or self.path.stat().st_size <= max(self.offset, 7):
            return []
        rows: List[Axes] = []
        for offset, record in _records(self.path, self.offset):
            self.offset = offset
            if (axes := _row_axes(record)) is not None:
                rows.append(axes)
        return rows


def transaction_logs(wandb_dir: Union[str, Path], run_id: str) -> List[Path]:
    """The transaction logs of run ``run_id`` under ``wandb_dir`` (W&B's ``wandb`` folder), one per session."""
    found = Path(wandb_dir).glob(f"*-{run_id}*/run-{run_id}.wandb")  # nothing when the folder is missing
    return sorted({path.resolve(): path for path in found if path.is_file()}.values())


def next_step(wandb_dir: Union[str, Path], run_id: str) -> int:
    """Where a resumed session's ``_step`` continues: one more than the largest in the run's logs (0: none)."""
    return 1 + max((record.history.step.num for path in transaction_logs(wandb_dir, run_id)
                    for _, record in _records(path) if record.WhichOneof("record_type") == "history"), default=-1)


def last_position(wandb_dir: Union[str, Path], run_id: str) -> Optional[Position]:
    """The position ``(train_iter, envstep, k)`` of the last row run ``run_id``'s logs hold (None: no row);
    rows are never logged twice, so ``k`` is the count of rows at those axes less one."""
    counts = Counter(axes for path in transaction_logs(wandb_dir, run_id) for axes in TransactionLog(path).new_rows())
    last = max(counts, default=None)
    return None if last is None else (last[0], last[1], counts[last] - 1)


#: ``wandb.init`` arguments the writer sets itself (to start or continue the run)
_OWN_INIT_ARGS = ("id", "resume", "config", "reinit")
#: the writer's options that are W&B settings, with the setting's name
_SETTINGS = {"project": "project", "entity": "entity", "name": "run_name", "group": "run_group", "tags": "run_tags",
             "mode": "mode", "dir": "root_dir", "notes": "run_notes", "job_type": "run_job_type"}


def check_options(wandb: Any, options: Mapping[str, Any], init_kwargs: Mapping[str, Any]) -> None:
    """Check the options when the writer is built, not at the first write: ``TypeError`` for one ``wandb.init``
    does not take or the writer sets itself, ``ValueError`` naming one W&B's settings refuse (``mode="offlinee"``)."""
    known = set(inspect.signature(wandb.init).parameters) - set(options)
    for option in init_kwargs:
        if option in _OWN_INIT_ARGS:
            raise TypeError(f"WandbWriter sets wandb.init's {option!r} itself (to start or continue the run); "
                            "leave it out")
        if option not in known:
            raise TypeError(f"WandbWriter got an unknown option {option!r}: its options are {', '.join(options)} "
                            f"and wandb.init's {', '.join(sorted(known - set(_OWN_INIT_ARGS)))}")
    given = {**options, **init_kwargs}
    settings = {_SETTINGS[key]: value for key, value in given.items() if key in _SETTINGS and value is not None}
    for option, values in [(None, settings), ("settings", given.get("settings"))]:
        try:
            if isinstance(values, Mapping):
                wandb.Settings(**values)
        except ValueError as exc:  # pydantic's ValidationError
            problem = exc.errors()[0]
            field, *where = problem["loc"]
            if option is None:
                option = next(key for key, name in _SETTINGS.items() if name == field)
            else:
                where = [field, *where]
            detail = "".join(f"item {part}: " if isinstance(part, int) else f"{part}: " for part in where)
            raise ValueError(f"WandbWriter option {option}={given[option]!r} is refused by W&B: "
                             f"{detail}{problem['msg']}") from None


def _pending_row(value: Any) -> str:
    """A row W&B had not written at the checkpoint: ``[train_iter, envstep, k, {name: value}]``."""
    if not isinstance(value, (list, tuple)) or len(value) != 4 or not isinstance(value[3], Mapping):
        return f"must be [train_iter, envstep, k, {{name: value}}], got {value!r}"
    return next((f"item {i} {why}" for i in range(3) if (why := count(value[i]))), "")


class WandbWriter(TrackingWriter):
    """Logs to a W&B run (see the module doc); the options and ``init_kwargs`` are ``wandb.init``'s. W&B's
    ``wandb/`` folder goes to ``dir``, else ``WANDB_DIR``, else ``work_dir`` (which holds ``wandb_run.json``)."""

    STATE_FIELDS = {**TrackingWriter.STATE_FIELDS, "pending": optional(list_of(_pending_row))}

    kind = "wandb"
    #: free bytes below which :meth:`flush` reports the disk as full (W&B would drop its next block silently)
    MIN_FREE_BYTES = 1 << 20
    #: seconds :meth:`close` waits for W&B's service to write the last rows of the finished run
    FINISH_TIMEOUT_S = 30.0

    def __init__(self, work_dir: Union[str, os.PathLike, None] = None, logger: Any = None, project: str = "rlearn",
                 entity: Optional[str] = None, name: Optional[str] = None, group: Optional[str] = None,
                 tags: Optional[Sequence[str]] = None, mode: Optional[str] = None, dir: Optional[str] = None,
                 **init_kwargs: Any) -> None:
        super().__init__(work_dir, logger, name)
        check_options(self.package, dict(project=project, entity=entity, name=name, group=group, tags=tags, mode=mode,
                                         dir=dir), init_kwargs)
        self.dir = dir
        #: what ``wandb.init`` gets besides the run's name, folder, id and config
        self.init_args = dict(project=project, entity=entity, group=group, tags=list(tags) if tags else None, mode=mode,
                              **init_kwargs)
        self.run: Any = None
        self._pending: List[Pending] = []  # logged by this process, not read back yet
        self._replay: List[Pending] = []  # a checkpoint's pending rows, logged again if the logs lack them
        self._durable: Optional[Position] = None  # the last position read back
        self._log: Optional[TransactionLog] = None
        self._disk_full = False
        self._step = 0  # W&B's ``_step`` of the next row: continuous over a resumed run's sessions

    def _directory(self) -> Optional[str]:
        """The folder of W&B's ``wandb/`` (None: the current one); ``WANDB_DIR`` read at each start, not once."""
        return self.dir or os.environ.get("WANDB_DIR") or (str(self.work_dir) if self.work_dir else None)

    def _start(self, run_id: Optional[str], config: Optional[Mapping[str, Any]]) -> str:
        directory = self._directory()
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
        step = 0
        if run_id is not None:  # W&B numbers each offline session's rows from 0: go on from the earlier ones
            with contextlib.suppress(LogUnreadable):
                step = next_step(Path(directory or os.getcwd()) / "wandb", run_id)
        self.run = self.package.init(**self.init_args, name=self.run_name, dir=directory, id=run_id,
                                     resume="allow" if run_id else None, reinit="create_new",
                                     config=dict(config) if config is not None else None)
        self._step = max(step, int(self.run.step))  # an online resume: the step W&B's server holds
        self.run.define_metric("envstep")
        self.run.define_metric("train_iter")
        self.run.define_metric("*", step_metric="envstep")
        # mode="disabled" writes nothing: there is no transaction log to read back
        self._log = None if self.run.settings.mode == "disabled" else TransactionLog(self.run.settings.sync_file)
        replay, self._replay = self._replay, []
        for position, row in replay:  # rows a killed process handed to W&B and W&B never wrote
            if self._logged is None or position > self._logged:
                self._log_row(row, position[0], position[1], position)
                self._logged = position
        return str(self.run.id)

    def _log_row(self, row: Row, step_iter: int, step_env: int, position: Optional[Position] = None) -> None:
        self.run.log({"train_iter": step_iter, "envstep": step_env, **row}, step=self._step)
        self._step += 1
        if self._log is not None:
            self._pending.append((position or self._position, dict(row)))

    def _read_back(self) -> None:
        """Read back the rows W&B wrote since the last call: they are durable, no longer pending."""
        if self._log is None:
            return
        try:
            rows = self._log.new_rows()
        except LogUnreadable:  # a wandb without the reader: trust run.log
            self._log, self._pending = None, []
            return
        for at in rows:  # rows at the last position read back continue its k
            self._durable = next_position(self._durable, *at)
        if rows:
            self._pending = [(position, row) for position, row in self._pending if position > self._durable]

    def _durable_position(self) -> Optional[Position]:
        return self._durable if self._log is not None else self._logged

    def _restore_logged(self) -> None:
        """Resume from the last row the run's logs hold, else from ``wandb_run.json``."""
        super()._restore_logged()
        if self.run_id is not None:
            with contextlib.suppress(LogUnreadable):
                found = last_position(Path(self._directory() or os.getcwd()) / "wandb", self.run_id)
                if found is not None:
                    self._logged = self._durable = found

    def flush(self) -> None:
        """Read back what W&B wrote, update ``wandb_run.json``; ``OSError`` (ENOSPC) under :attr:`MIN_FREE_BYTES`
        free for W&B's files."""
        if not self._started:
            return
        self._read_back()
        super().flush()
        if self._log is None:
            return
        folder = Path(self.run.settings.sync_dir)
        free = shutil.disk_usage(folder).free
        if free < self.MIN_FREE_BYTES:
            self._disk_full = True
            held = "no row" if self._durable is None else f"the rows up to train_iter {self._durable[0]}"
            raise OSError(errno.ENOSPC, f"No space left on device: {free} bytes free for W&B's files in {folder} "
                          f"(W&B drops rows there without an error; its transaction log holds {held})", str(folder))

    def _finish(self) -> None:
        """Finish the run, then wait until its log holds every row (W&B writes it after ``finish()``)."""
        if self.run is not None:
            self.run.finish()
            self.run = None
        deadline = time.monotonic() + (0.0 if self._disk_full else self.FINISH_TIMEOUT_S)
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.05)
            self._read_back()
        if self._pending and self._log is not None:
            missing, self._pending = self._pending, []
            raise OSError(errno.EIO, f"W&B did not write {len(missing)} row(s) of this run (train_iter "
                          f"{missing[0][0][0]} to {missing[-1][0][0]}) to {self._log.path} (a full disk? see its "
                          "logs/debug-internal.log)", str(self._log.path))

    def state_dict(self) -> Dict[str, Any]:
        """The tracking state plus ``pending``: the rows W&B has not written yet."""
        self._read_back()
        return {**super().state_dict(), "pending": [[*position, row] for position, row in self._replay + self._pending]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The tracking state, and the rows to log again if the transaction logs lack them."""
        super().load_state_dict(state)
        self._replay = [((int(p[0]), int(p[1]), int(p[2])), dict(p[3])) for p in state.get("pending") or ()]

    def _log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)
