"""``ThreadChooser``: run each train iteration with the torch thread count that pays *now* (CPU only)."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar

import torch

from rlearn import trace

__all__ = ["ThreadChooser"]

T = TypeVar("T")


class ThreadChooser:
    """How many torch threads a train iteration runs with: ``threads``, or 1 while more do not pay.

    PyTorch's intra-op threads split every product over the cores. On idle cores that is the fastest way
    to run an iteration; but when another process occupies a core, every kernel waits at its barrier for
    the descheduled worker, and one thread is several times faster. Which case holds changes during a
    run, so the chooser measures (``adaptive=True``): every ``probe_every`` iterations it runs
    ``probe_len`` of them on one thread, then ``probe_len`` on ``threads``, and keeps the mode with the
    lower mean iteration time until the next probe. Iterations of one algorithm can differ in cost (TD3's
    actor steps), so ``probe_len`` should be a multiple of their cycle: both halves of the probe then hold
    the same mix. A multi-thread probe iteration slower than twice the slowest one-thread iteration ends
    the probe at once: under heavy load those are the expensive ones.

    The first ``probe_len`` iterations of each period run in the current mode, as a warm-up. With
    ``adaptive=False`` every iteration uses ``threads``. ``decisions`` keeps the last probes' outcomes
    ``(iteration, one-thread mean s, multi-thread mean s, threads chosen)``; each decision is also a
    ``learn_threads`` counter in the timeline trace.

    ``iterations_at`` counts the iterations :meth:`run` ran at each thread count (probes included): how much
    of a run fell back to one thread.

    Use :meth:`run` around each iteration (or :meth:`threads_now` / :meth:`iteration_done` by hand). It is
    a CPU tool: on a GPU the host threads do not run the products and wall times without a device sync do
    not measure them, so policies create no chooser there.
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
