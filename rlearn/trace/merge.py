"""Merge every rank's records into one Chrome Trace Event JSON (the format Perfetto and chrome://tracing open),
on rank 0's wall clock; ``pid = rank + 1`` (Perfetto treats pid 0 as the kernel's idle process), one ``tid`` per
lane, unique across the trace; overlapping-but-not-nested spans go on extra lanes (:mod:`rlearn.trace.lanes`).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rlearn.fileio import atomic_write_bytes
from rlearn.trace.lanes import assign_lanes, lane_label
from rlearn.trace.recorder import PathLike
from rlearn.trace.records import RecordsError, RecordsFile, read_records
from rlearn.values import is_int

#: lanes shown first, in this order; any other lane follows in alphabetical order
LANE_ORDER = ("collector", "learner", "ppg", "evaluator", "checkpoint")
#: the span arg that numbers learner iterations (used by ``--from-iter`` / ``--to-iter``) ...
ITER_ARG = "iter"
#: ... on spans of this lane (an ``iter`` arg elsewhere, e.g. on an evaluation, is only an annotation)
ITER_LANE = "learner"

_RANK_FILE = re.compile(r"^rank(\d+)\.jsonl$")
#: the records cannot be merged as asked (no records, unknown rank, empty iteration range...)
TraceMergeError = RecordsError


@dataclass(frozen=True)
class Interval:
    """One recorded phase, in nanoseconds of rank 0's wall clock."""

    rank: int
    lane: str
    name: str
    start: int
    end: int
    args: Dict[str, Any] = field(default_factory=dict, compare=False)
    thread: Tuple[int, int] = (0, 0)  # (pid, OS thread id) that recorded it; spans nest only within one thread

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class CounterSample:
    """One counter sample, at ``t`` nanoseconds of rank 0's wall clock."""

    rank: int
    name: str
    t: int
    value: float


@dataclass
class RankInfo:
    """What the merged trace says about one rank."""

    rank: int
    path: Path
    hostname: str
    pids: List[int]
    clock_offset_ns: int
    clock_error_ns: int
    torn_lines: int


@dataclass
class MergeResult:
    """The merged trace plus what went into it (for the summary table and messages)."""

    trace: Dict[str, Any]
    intervals: List[Interval]
    counters: List[CounterSample]
    ranks: List[RankInfo]

    @property
    def torn_lines(self) -> int:
        """Partially written lines skipped over all ranks (a process killed while writing)."""
        return sum(info.torn_lines for info in self.ranks)


def trace_dir(work_dir: PathLike) -> Path:
    """The folder holding the rank files: ``<work_dir>/trace``, or ``work_dir`` itself if it holds them."""
    work_dir = Path(work_dir)
    if (work_dir / "trace").is_dir():
        return work_dir / "trace"
    if work_dir.is_dir() and any(_RANK_FILE.match(p.name) for p in work_dir.iterdir()):
        return work_dir
    if not work_dir.exists():
        raise TraceMergeError(f"work dir {str(work_dir)!r} does not exist")
    raise TraceMergeError(f"no trace records in {str(work_dir)!r}: expected {str(work_dir / 'trace')!r} "
                          "with rank<r>.jsonl files (was the run started with profile=True or RLEARN_PROFILE=1?)")


def load_records(work_dir: PathLike, ranks: Optional[Iterable[int]] = None) -> List[RecordsFile]:
    """Read the ``rank<r>.jsonl`` files of ``ranks`` (all by default) under the work dir (see :func:`trace_dir`);
    an unknown rank raises :class:`TraceMergeError`."""
    folder = trace_dir(work_dir)
    matches = ((_RANK_FILE.match(path.name), path) for path in folder.iterdir() if path.is_file())
    available = dict(sorted((int(match.group(1)), path) for match, path in matches if match))
    if not available:
        raise TraceMergeError(f"no rank<r>.jsonl files in {str(folder)!r}")
    wanted = sorted(set(ranks)) if ranks is not None else list(available)
    missing = [rank for rank in wanted if rank not in available]
    if missing:
        raise TraceMergeError(f"no records for rank(s) {missing}; available ranks: {list(available)}")
    files = []
    for rank in wanted:
        records = read_records(available[rank])
        for session in records.sessions:
            if session.rank != rank:
                raise RecordsError(f"{available[rank]}: header says rank {session.rank}, file name says {rank}")
        files.append(records)
    if not any(records.sessions for records in files):
        names = ", ".join(str(records.path) for records in files)
        raise TraceMergeError(f"no trace records in {names}: no recording session (empty files, or a process "
                              "stopped before it recorded anything)")
    return files


def collect(files: Sequence[RecordsFile]) -> Tuple[List[Interval], List[CounterSample], List[RankInfo]]:
    """Every span and counter of ``files`` on rank 0's wall clock, plus one :class:`RankInfo` per file."""
    intervals: List[Interval] = []
    counters: List[CounterSample] = []
    infos: List[RankInfo] = []
    for records in files:
        if not records.sessions:
            continue
        for session in records.sessions:
            rank = session.rank
            for span in session.spans:
                intervals.append(Interval(rank, span["lane"], span["name"], session.to_wall_ns(span["start"]),
                                          session.to_wall_ns(span["end"]), dict(span.get("args", {})),
                                          (session.header["pid"], span.get("tid", 0))))
            for sample in session.counters:
                counters.append(CounterSample(rank, sample["name"], session.to_wall_ns(sample["t"]),
                                              float(sample["value"])))
        last = records.sessions[-1]
        infos.append(RankInfo(
            rank=last.rank, path=records.path, hostname=str(last.header.get("hostname", "?")),
            pids=[s.header["pid"] for s in records.sessions], clock_offset_ns=last.clock_offset_ns,
            clock_error_ns=max(s.clock_error_ns for s in records.sessions), torn_lines=records.torn_lines))
    return intervals, counters, infos


def rank_bounds(intervals: Iterable[Interval]) -> Dict[int, Tuple[int, int]]:
    """Per rank, ``(start, end)`` from the start of its first interval to the end of its last."""
    bounds: Dict[int, Tuple[int, int]] = {}
    for interval in intervals:
        low, high = bounds.get(interval.rank, (interval.start, interval.end))
        bounds[interval.rank] = (min(low, interval.start), max(high, interval.end))
    return bounds


def select_iterations(intervals: Sequence[Interval], counters: Sequence[CounterSample],
                      from_iter: Optional[int] = None, to_iter: Optional[int] = None
                      ) -> Tuple[List[Interval], List[CounterSample]]:
    """Keep, per rank, what lies entirely inside the learner-lane spans whose ``iter`` is in ``[from_iter,
    to_iter]`` (``None`` bounds are open); :class:`TraceMergeError` when there are none."""
    if from_iter is None and to_iter is None:
        return list(intervals), list(counters)
    if from_iter is not None and to_iter is not None and from_iter > to_iter:
        raise TraceMergeError(f"--from-iter {from_iter} is after --to-iter {to_iter}")
    numbered = [(i.args[ITER_ARG], i) for i in intervals if i.lane == ITER_LANE and is_int(i.args.get(ITER_ARG))]
    if not numbered:
        raise TraceMergeError(f"no span on the {ITER_LANE!r} lane carries an {ITER_ARG!r} arg, so iterations "
                              f"cannot be selected (record it with span('learner/iteration', {ITER_ARG}=n))")
    windows = rank_bounds(interval for number, interval in numbered
                          if (from_iter is None or number >= from_iter) and (to_iter is None or number <= to_iter))
    if not windows:
        low = "first" if from_iter is None else from_iter
        high = "last" if to_iter is None else to_iter
        numbers = [n for n, _ in numbered]
        raise TraceMergeError(f"no learner iteration in [{low}, {high}]; recorded iterations are "
                              f"{min(numbers)}..{max(numbers)}")
    kept = [i for i in intervals if i.rank in windows
            and windows[i.rank][0] <= i.start and i.end <= windows[i.rank][1]]
    return kept, _counters_in(counters, windows)


def _counters_in(counters: Sequence[CounterSample], windows: Mapping[int, Tuple[int, int]]) -> List[CounterSample]:
    """The counter samples inside each rank's window, plus, per counter, the last sample before the window (its
    value holds until the next sample, so it is the value when the window opens; a rate is stamped at the start
    of the interval it measures), moved to the window's start."""
    kept: List[CounterSample] = []
    opening: Dict[Tuple[int, str], CounterSample] = {}
    for sample in counters:
        if sample.rank not in windows:
            continue
        low, high = windows[sample.rank]
        key = (sample.rank, sample.name)
        if sample.t < low and (key not in opening or opening[key].t <= sample.t):
            opening[key] = sample
        elif low <= sample.t <= high:
            kept.append(sample)
    return [replace(sample, t=windows[sample.rank][0]) for sample in opening.values()] + kept


def _lane_sort_key(lane: str) -> Tuple[int, str]:
    return (LANE_ORDER.index(lane), "") if lane in LANE_ORDER else (len(LANE_ORDER), lane)


def to_chrome_trace(intervals: Sequence[Interval], counters: Sequence[CounterSample],
                    ranks: Sequence[RankInfo]) -> Dict[str, Any]:
    """The Chrome Trace Event JSON object (``traceEvents``, ``displayTimeUnit``, ``otherData``)."""
    rank_ids = sorted({info.rank for info in ranks} | {i.rank for i in intervals} | {c.rank for c in counters})
    times = [i.start for i in intervals] + [c.t for c in counters]
    base = min(times) if times else 0
    next_tid = max(rank_ids, default=-1) + 2  # tids come after every pid (rank + 1) and are unique
    by_rank_lane: Dict[int, Dict[str, List[Interval]]] = {}
    for interval in intervals:
        by_rank_lane.setdefault(interval.rank, {}).setdefault(interval.lane, []).append(interval)
    metadata: List[Dict[str, Any]] = []
    events: List[Dict[str, Any]] = []
    for rank in rank_ids:
        pid = rank + 1
        metadata.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"rank {rank}"}})
        metadata.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": rank}})
        by_lane = by_rank_lane.get(rank, {})
        for lane in sorted(by_lane, key=_lane_sort_key):
            spans = by_lane[lane]
            sub_lanes = assign_lanes([(s.start, s.end) for s in spans], [s.thread for s in spans])
            for sub in range(max(sub_lanes) + 1):
                metadata.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": next_tid + sub,
                                 "args": {"name": lane_label(lane, sub)}})
                metadata.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": next_tid + sub,
                                 "args": {"sort_index": next_tid + sub}})
            for span, sub in zip(spans, sub_lanes):
                event = {"ph": "X", "name": span.name, "cat": lane, "pid": pid, "tid": next_tid + sub,
                         "ts": (span.start - base) / 1000, "dur": span.duration / 1000}
                if span.args:
                    event["args"] = span.args
                events.append(event)
            next_tid += max(sub_lanes) + 1
    for sample in counters:
        events.append({"ph": "C", "name": sample.name, "pid": sample.rank + 1, "ts": (sample.t - base) / 1000,
                       "args": {"value": sample.value}})
    events.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
    other = {"generator": "rlearn trace", "base_wall_time_ns": str(base)}
    for info in ranks:
        clock = ("reference clock" if info.rank == 0
                 else f"clock offset {info.clock_offset_ns} ns +- {info.clock_error_ns} ns")
        other[f"rank {info.rank}"] = f"host {info.hostname}, pid {','.join(map(str, info.pids))}, {clock}"
    return {"traceEvents": metadata + events, "displayTimeUnit": "ms", "otherData": other}


def merge_work_dir(work_dir: PathLike, ranks: Optional[Iterable[int]] = None, from_iter: Optional[int] = None,
                   to_iter: Optional[int] = None) -> MergeResult:
    """Read and merge the records of a work dir: the ``ranks`` (all by default), learner iterations
    ``from_iter..to_iter`` (see :func:`select_iterations`)."""
    intervals, counters, infos = collect(load_records(work_dir, ranks))
    intervals, counters = select_iterations(intervals, counters, from_iter, to_iter)
    return MergeResult(to_chrome_trace(intervals, counters, infos), intervals, counters, infos)


def write_trace(trace: Dict[str, Any], path: PathLike) -> Path:
    """Write ``trace`` as JSON, gzip-compressed (one stream) when ``path`` ends in ``.gz``, atomically (an
    interrupted write never replaces an older trace); return the path."""
    data = json.dumps(trace, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return atomic_write_bytes(path, gzip.compress(data, mtime=0) if Path(path).name.endswith(".gz") else data)

