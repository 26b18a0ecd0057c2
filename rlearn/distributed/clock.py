"""Clock offset between ranks, for aligning timeline traces: every rank reads its wall clock right after a
barrier, several times; the offset is the median of ``t_r - t_0``, its error bound half their spread plus the
barrier's release skew."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from rlearn.distributed.utils import all_gather_object, barrier, get_rank, is_distributed


@dataclass(frozen=True)
class ClockOffset:
    """This rank's wall clock minus rank 0's, in nanoseconds, with an error bound."""

    offset_ns: int
    error_ns: int


def measure_clock_offset(rounds: int = 7) -> ClockOffset:
    """Estimate this rank's wall-clock offset from rank 0 (collective: every rank must call it)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if not is_distributed():
        return ClockOffset(0, 0)
    diffs, skews = [], []
    for _ in range(rounds):
        before = time.perf_counter_ns()
        barrier()
        stamp = time.time_ns()
        skews.append(time.perf_counter_ns() - before)
        stamps = all_gather_object(stamp)
        diffs.append(stamps[get_rank()] - stamps[0])
    if get_rank() == 0:  # the reference clock: its offset to itself is exactly 0
        return ClockOffset(0, 0)
    spread = (max(diffs) - min(diffs)) // 2
    return ClockOffset(offset_ns=int(statistics.median(diffs)), error_ns=int(spread + min(skews)))
