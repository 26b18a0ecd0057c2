"""``TBWriter``: one TensorBoard event file written synchronously in the caller's thread, counting points.

Unlike ``tensorboardX.SummaryWriter`` (a background thread), a flushed event is in the file, so a checkpoint
never counts a point that is not on disk. The summaries are tensorboardX's own, the framing TFRecord's.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Union

import crc32c
from tensorboardX.proto import event_pb2
from tensorboardX.proto.summary_pb2 import Summary
from tensorboardX.summary import scalar, text

__all__ = ["TBWriter", "PointTable", "encode_record", "masked_crc32c"]

#: per tag: ``[last step written, number of points written at that step]``
PointTable = Dict[str, List[int]]

_HEADER = struct.Struct("<Q")
_CRC = struct.Struct("<I")


def masked_crc32c(data: bytes) -> int:
    """The TFRecord checksum of ``data``: its CRC-32C, rotated right by 15 bits plus a constant."""
    crc = crc32c.crc32c(data) & 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def encode_record(data: bytes) -> bytes:
    """One TFRecord record around ``data``."""
    header = _HEADER.pack(len(data))
    return header + _CRC.pack(masked_crc32c(header)) + data + _CRC.pack(masked_crc32c(data))


class TBWriter:
    """TensorBoard event files in ``logdir``, written synchronously, counting points per tag (in ``points``). A
    file opens at the first write, named as by tensorboardX plus nanoseconds (files sort in creation order)."""

    def __init__(self, logdir: Union[str, os.PathLike], points: Optional[PointTable] = None) -> None:
        self.logdir = Path(logdir)
        #: per tag: ``[last step written, points written at that step]`` (what the rewind keeps)
        self.points: PointTable = points if points is not None else {}
        #: per tag: every point written (what a resume expects the event files to hold)
        self.totals: Dict[str, int] = {}
        self._file: Optional[BinaryIO] = None
        self._unsynced = False

    @property
    def event_file(self) -> Optional[str]:
        """Path of the event file currently open, or None when closed."""
        return self._file.name if self._file is not None else None

    def add_summary(self, summary: Summary, global_step: int) -> None:
        """Write ``summary`` at ``global_step`` (not counted as a point)."""
        if self._file is None:
            self.logdir.mkdir(parents=True, exist_ok=True)
            now = time.time()
            name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{time.time_ns()}"
            self._file = open(self.logdir / name, "wb")
            header = event_pb2.Event(wall_time=now, file_version="brain.Event:2")
            self._file.write(encode_record(header.SerializeToString()))
        event = event_pb2.Event(summary=summary, wall_time=time.time())
        event.step = int(global_step)
        self._file.write(encode_record(event.SerializeToString()))
        self._unsynced = True

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int) -> None:
        """As ``SummaryWriter.add_scalar`` (the same summary); also counts the point for the rewind."""
        self.add_summary(scalar(tag, scalar_value), global_step)
        self.count_point(tag, int(global_step))

    def add_text(self, tag: str, text_string: str, global_step: int) -> None:
        """As ``SummaryWriter.add_text``: a text summary (TEXT dashboard)."""
        self.add_summary(text(tag, text_string), global_step)

    def count_point(self, tag: str, step: int) -> None:
        """Count one point of ``tag`` at ``step`` in :attr:`points` and :attr:`totals`."""
        self.totals[tag] = self.totals.get(tag, 0) + 1
        entry = self.points.get(tag)
        self.points[tag] = [step, entry[1] + 1 if entry is not None and entry[0] == step else 1]

    def flush(self, sync: bool = True) -> None:
        """Hand the events written to the OS; with ``sync``, fsync the file too (about 5 ms) if it changed."""
        if self._file is None:
            return
        self._file.flush()
        if sync and self._unsynced:
            os.fsync(self._file.fileno())
            self._unsynced = False

    def close(self) -> None:
        """Flush, fsync and close the event file; a later write opens a new one."""
        if self._file is not None:
            self.flush(sync=True)
            self._file.close()
            self._file = None
