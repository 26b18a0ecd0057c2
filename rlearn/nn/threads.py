"""``ThreadChooser``: run each train iteration with the torch thread count that pays *now* (CPU only)."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

import torch

from rlearn import trace

__all__ = ["ThreadChooser"]

T = TypeVar("T")


class ThreadChooser:
    """How many torch threads a train iteration runs with (use :meth:`run` around each): ``threads``, or 1 while
    more do not pay (on a loaded machine every multi-threaded kernel waits for its descheduled workers).

    With ``adaptive``, every ``probe_every`` iterations it times ``probe_len`` of them (after as many of warm-up)
    on one thread, then ``probe_len`` on ``threads`` (a multiple of the algorithm's cycle of iterations), and keeps
    the faster until the next probe; a multi-thread iteration slower than twice the slowest one-thread one ends
    the probe at once. ``decisions``: the last ``(iteration, one-thread mean s, multi-thread mean s, threads)``;
    ``iterations_at``: iterations per thread count.
    """

    def __init__(self, threads: int, adaptive: bool = True, probe_every: int = 1000, probe_len: int = 8) -> None:
        if threads < 1 or probe_every < 3 * probe_len:
            raise ValueError(f"ThreadChooser: need threads >= 1 and probe_every >= 3 * probe_len, got "
                             f"{threads}, {probe_every}, {probe_len}")
        self.threads = threads
        self.adaptive = adaptive and threads > 1 and probe_len > 0
        self.probe_every = probe_every
        self.probe_len = probe_len
        #: threads used outside probes; updated after every probe
        self.chosen = threads
        self.decisions: List[Tuple[int, float, float, int]] = []
        #: iterations run by :meth:`run` at each thread count
        self.iterations_at: Dict[int, int] = {1: 0, threads: 0}
        self._iteration = 0
        self._times: Dict[int, List[float]] = {1: [], threads: []}
        self._decided = False  # whether this period's probe has already decided

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` with :meth:`threads_now` torch threads, timed for :meth:`iteration_done`; the
        caller's thread count is restored afterwards, also when ``fn`` raises (then nothing is recorded)."""
        threads = self.threads_now()
        outer = torch.get_num_threads()
        switch = threads != outer
        if switch:
            torch.set_num_threads(threads)
        start = time.perf_counter()
        try:
            result = fn(*args)
        finally:
            if switch:
                torch.set_num_threads(outer)
        self.iteration_done(time.perf_counter() - start)
        self.iterations_at[threads] += 1
        return result

    def _probing(self, phase: int) -> Optional[int]:
        """The thread count this period's probe runs at ``phase``, or None outside the probe."""
        if not self.adaptive or self._decided or phase < self.probe_len or phase >= 3 * self.probe_len:
            return None
        return 1 if phase < 2 * self.probe_len else self.threads

    def threads_now(self) -> int:
        """Threads for the iteration about to run."""
        probe = self._probing(self._iteration % self.probe_every)
        return self.chosen if probe is None else probe

    def iteration_done(self, seconds: float) -> None:
        """Record the wall time of the iteration that just ran (with :meth:`threads_now` threads)."""
        phase = self._iteration % self.probe_every
        self._iteration += 1
        if phase == 0:
            self._decided = False
        probe = self._probing(phase)
        if probe is None:
            return
        self._times[probe].append(seconds)
        if probe == 1:
            return
        serial, multi = self._times[1], self._times[self.threads]
        too_slow = seconds > 2.0 * max(serial)  # ends the probe early: that is all we need to know
        if too_slow or phase == 3 * self.probe_len - 1:
            serial_mean, multi_mean = sum(serial) / len(serial), sum(multi) / len(multi)
            if too_slow:
                multi_mean = max(multi_mean, seconds)
            self.chosen = self.threads if multi_mean < serial_mean else 1
            self.decisions = self.decisions[-99:] + [(self._iteration, serial_mean, multi_mean, self.chosen)]
            trace.counter("learn_threads", self.chosen)
            self._times = {1: [], self.threads: []}
            self._decided = True
