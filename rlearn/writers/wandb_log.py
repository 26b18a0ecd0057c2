"""What a W&B run really holds: the rows in its transaction logs (``run-<id>.wandb``).

W&B's service writes each run's transaction log in 32 KiB blocks and reports no write error to the training
process, so a row handed to ``run.log`` is durable only once it can be read back from that file.
:class:`TransactionLog` reads one log incrementally, :func:`last_position` every log of a run, both with
W&B's own reader (:class:`LogUnreadable` when this wandb has none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

__all__ = ["TransactionLog", "LogUnreadable", "last_position", "transaction_logs"]

Axes = Tuple[int, int]


class LogUnreadable(ImportError):
    """This wandb has no reader for its transaction logs."""


def _reader():
    try:
        from wandb.proto import wandb_internal_pb2
        from wandb.sdk.internal import datastore
    except ImportError as exc:  # a wandb without the reader: the caller falls back to its own bookkeeping
        raise LogUnreadable(f"this wandb cannot read its transaction logs ({exc})") from exc
    return datastore, wandb_internal_pb2


class TransactionLog:
    """Reads the rows of one transaction log as W&B's service writes it, each row once.

    Args:
        path: the ``run-<id>.wandb`` file (it may not exist yet).
    """

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self.offset = 0  # where the next unread record starts (0: the file's header is not read yet)

    def new_rows(self) -> List[Axes]:
        """``(train_iter, envstep)`` of every history row written to the file since the last call (rows without
        both, logged by other code, are left out). A record that is not complete yet is read next time."""
        datastore, pb = _reader()
        if not self.path.is_file() or self.path.stat().st_size <= max(self.offset, 7):
            return []
        store = datastore.DataStore()
        rows: List[Axes] = []
        try:
            store.open_for_scan(str(self.path))
            if self.offset:
                store.seek(self.offset)
            while (data := store.scan_data()) is not None:
                self.offset = store.get_offset()
                axes = _row_axes(pb, data)
                if axes is not None:
                    rows.append(axes)
        except (AssertionError, OSError, ValueError):  # the header or a block being written, or damage: stop there
            pass
        finally:
            store.close()
        return rows


def _row_axes(pb, data: bytes) -> Optional[Axes]:
    record = pb.Record()
    record.ParseFromString(data)
    if record.WhichOneof("record_type") != "history":
        return None
    values = {}
    for item in record.history.item:
        key = item.key or "/".join(item.nested_key)  # newer W&B versions fill nested_key only
        if key in ("train_iter", "envstep"):
            values[key] = item.value_json
    if len(values) != 2:
        return None
    return int(json.loads(values["train_iter"])), int(json.loads(values["envstep"]))


def transaction_logs(wandb_dir: Union[str, Path], run_id: str) -> List[Path]:
    """Every transaction log of run ``run_id`` under ``wandb_dir`` (the ``wandb`` folder W&B creates), one per
    session (offline or online)."""
    root = Path(wandb_dir)
    if not root.is_dir():
        return []
    found = {path.resolve(): path for path in root.glob(f"*-{run_id}*/run-{run_id}.wandb") if path.is_file()}
    return sorted(found.values())


def last_position(wandb_dir: Union[str, Path], run_id: str) -> Optional[Tuple[int, int, int]]:
    """The position ``(train_iter, envstep, k)`` of the last row that run ``run_id`` holds over all its
    transaction logs (``k``: rows at that same train iteration and env step, minus one), or None when no log
    holds a row. Rows are never logged twice, so counting them gives ``k`` whatever the sessions' order."""
    counts: Dict[Axes, int] = {}
    for path in transaction_logs(wandb_dir, run_id):
        for axes in TransactionLog(path).new_rows():
            counts[axes] = counts.get(axes, 0) + 1
    if not counts:
        return None
    last = max(counts)
    return last[0], last[1], counts[last] - 1
