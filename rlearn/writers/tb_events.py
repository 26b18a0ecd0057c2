"""TensorBoard event files: reading them back (checksums checked) and the rewind used on resume.

:func:`rewind_event_files` keeps only the points written before a checkpoint, so the resumed run adds the
rest with no duplicated and no missing point. :mod:`rlearn.writers.tb_file` writes the files.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

from google.protobuf.message import DecodeError
from tensorboardX.proto import event_pb2

from rlearn.fileio import atomic_write_bytes
from rlearn.writers.tb_file import _CRC, _HEADER, PointTable, TBWriter, encode_record, masked_crc32c

__all__ = ["TBWriter", "PointTable", "EventFile", "RewindReport", "read_records", "iter_events", "encode_record",
           "event_files", "rewind_event_files"]

_FRAME = _HEADER.size + _CRC.size  # the length and its checksum, before a record's data


@dataclass
class EventFile:
    """The valid records of one event file, the damaged ones skipped in the middle, and a damaged tail."""

    path: Path
    records: List[bytes] = field(default_factory=list)  # the serialized events
    raw: List[bytes] = field(default_factory=list)  # the same records as stored (framing and CRCs included)
    #: what a crash mid-write leaves: a damaged or truncated region with no valid record after it
    damaged_tail: Optional[str] = None
    #: damaged regions followed by valid records (bit rot, a disk error): skipped, one description each
    corrupt: List[str] = field(default_factory=list)


def _record_at(blob: bytes, offset: int) -> Tuple[Optional[int], str]:
    """``(end, "")`` for a valid record starting at ``offset``, else ``(None, what is wrong)``."""
    if len(blob) - offset < _FRAME:
        return None, "truncated record header"
    header = blob[offset : offset + _HEADER.size]
    if _CRC.unpack_from(blob, offset + _HEADER.size)[0] != masked_crc32c(header):
        return None, "bad length checksum"
    start = offset + _FRAME
    end = start + _HEADER.unpack(header)[0]
    if end + _CRC.size > len(blob):
        return None, "truncated record"
    if _CRC.unpack_from(blob, end)[0] != masked_crc32c(blob[start:end]):
        return None, "bad data checksum"
    return end + _CRC.size, ""


def _next_record(blob: bytes, offset: int) -> Optional[int]:
    """Offset of the first valid record after ``offset``, or None. No event is 2**40 bytes long, so only
    the positions whose 8-byte length ends in three zero bytes are checked (both checksums must hold)."""
    zeros = blob.find(b"\x00\x00\x00", offset + 6)
    while zeros >= 0 and _record_at(blob, zeros - 5)[0] is None:
        zeros = blob.find(b"\x00\x00\x00", zeros + 1)
    return zeros - 5 if zeros >= 0 else None


def read_records(path: Union[str, os.PathLike]) -> EventFile:
    """The TFRecord records of ``path`` whose two CRCs hold; reading resumes at the next valid one after damage
    (:attr:`EventFile.corrupt`; at the end of the file: :attr:`EventFile.damaged_tail`)."""
    blob = Path(path).read_bytes()
    result = EventFile(Path(path))
    offset = 0
    while offset < len(blob):
        end, problem = _record_at(blob, offset)
        if end is not None:
            result.records.append(blob[offset + _FRAME : end - _CRC.size])
            result.raw.append(blob[offset:end])
            offset = end
            continue
        resume = _next_record(blob, offset)
        if resume is None:
            result.damaged_tail = f"{problem} at byte {offset}"
            break
        result.corrupt.append(f"{problem} at byte {offset} ({resume - offset} bytes skipped)")
        offset = resume
    return result


def iter_events(path: Union[str, os.PathLike]) -> Iterator[event_pb2.Event]:
    """The events of one file (damaged records skipped, see :func:`read_records`)."""
    return (event_pb2.Event.FromString(data) for data in read_records(path).records)


def event_files(logdir: Union[str, os.PathLike]) -> List[Path]:
    """Every TensorBoard event file under ``logdir`` (recursively), in the order TensorBoard reads them."""
    return sorted(p for p in Path(logdir).rglob("*") if p.is_file() and "tfevents" in p.name)


@dataclass
class RewindReport:
    """What :func:`rewind_event_files` changed."""

    files_rewritten: List[Path] = field(default_factory=list)
    points_removed: int = 0
    damaged_tails: Dict[Path, str] = field(default_factory=dict)
    #: per file, the damaged records found in the middle and dropped (the records after them are kept)
    corrupt_records: Dict[Path, List[str]] = field(default_factory=dict)
    skipped: Dict[Path, str] = field(default_factory=dict)
    #: per tag, the points the event files hold after the rewind (the skipped files left out)
    kept: Counter[str] = field(default_factory=Counter)

    @property
    def corrupt_count(self) -> int:
        """How many damaged records were dropped from the middle of files."""
        return sum(len(found) for found in self.corrupt_records.values())


def rewind_event_files(logdir: Union[str, os.PathLike], train_iter: int, envstep: int,
                       points: Optional[Mapping[str, List[int]]] = None, skip: Tuple[Union[str, os.PathLike], ...] = (),
                       logger: Optional[logging.Logger] = None, drop_prefixes: Tuple[str, ...] = ()) -> RewindReport:
    """Remove from the event files under ``logdir`` every point written after a checkpoint.

    A value of tag ``T`` at step ``s`` (files in TensorBoard's reading order) is kept when ``T`` is in
    ``points`` (the :class:`TBWriter` table of the checkpoint) with last step ``L`` and ``n`` points at ``L``
    and ``s < L``, or ``s == L`` for the first ``n``; for another tag, when ``s`` is not beyond the checkpoint
    on the tag's axis (``envstep`` for ``*_step/...`` tags, ``train_iter`` otherwise). Tags starting with one
    of ``drop_prefixes`` go whatever their step. Damaged records are dropped (reported, warned about on
    ``logger``); changed files are replaced atomically; the files in ``skip`` (the one open) are left alone.
    """
    points = points or {}
    skipped = {Path(p).resolve() for p in skip}
    seen_at_last: Dict[str, int] = {}
    report = RewindReport()

    def keep(tag: str, step: int) -> bool:
        if drop_prefixes and tag.startswith(drop_prefixes):
            return False
        entry = points.get(tag)
        if entry is None:
            return step <= (envstep if tag.split("/", 1)[0].endswith("_step") else train_iter)
        if step != int(entry[0]):
            return step < int(entry[0])
        seen_at_last[tag] = seen_at_last.get(tag, 0) + 1
        return seen_at_last[tag] <= int(entry[1])

    for path in event_files(logdir):
        if path.resolve() in skipped:
            continue
        content = read_records(path)
        try:
            events = [event_pb2.Event.FromString(data) for data in content.records]
        except DecodeError as exc:  # valid records that are not events: not ours to rewrite
            report.skipped[path] = f"not a TensorBoard event file ({exc})"
            continue
        changed = content.damaged_tail is not None or bool(content.corrupt)
        if content.damaged_tail is not None:
            report.damaged_tails[path] = content.damaged_tail
        if content.corrupt:
            report.corrupt_records[path] = list(content.corrupt)
        out: List[bytes] = []
        for event, raw in zip(events, content.raw):
            kept = [value for value in event.summary.value if keep(value.tag, event.step)]
            report.kept.update(value.tag for value in kept)
            removed = len(event.summary.value) - len(kept)
            if removed == 0:
                out.append(raw)  # unchanged records are copied as stored: no checksum to recompute
                continue
            changed = True
            report.points_removed += removed
            if kept:
                del event.summary.value[:]
                event.summary.value.extend(kept)
                out.append(encode_record(event.SerializeToString()))
        if changed:
            # the temporary name must not contain "tfevents", or TensorBoard would read it
            atomic_write_bytes(path, b"".join(out), tmp_prefix=".rlearn-rewind-")
            report.files_rewritten.append(path)
    if logger is not None:
        for path, why in report.skipped.items():
            logger.warning("TensorBoard rewind: left %s untouched: %s", path, why)
        for path, found in report.corrupt_records.items():
            logger.warning("TensorBoard rewind: %s had %d damaged record(s) in the middle (%s); dropped them (the "
                           "points they held are lost) and kept the valid records after them",
                           path, len(found), "; ".join(found))
        if report.files_rewritten or report.damaged_tails:
            logger.info("TensorBoard rewind to train_iter=%d envstep=%d: removed %d point(s) written after the "
                        "checkpoint from %d event file(s)%s", train_iter, envstep, report.points_removed,
                        len(report.files_rewritten),
                        "".join(f"; dropped damaged tail of {path.name} ({why})"
                                for path, why in report.damaged_tails.items()))
    return report
