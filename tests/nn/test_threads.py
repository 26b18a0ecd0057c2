"""ThreadChooser: probes, decisions, fixed mode, and ``run`` (thread switching and restoring)."""

from __future__ import annotations

import pytest
import torch

from rlearn.nn import ThreadChooser


def drive(chooser, iterations: int, seconds) -> list:
    """Run ``iterations`` fake iterations through ``chooser``; ``seconds(it, threads)`` is each one's time.
    Returns the thread counts used."""
    used = []
    for it in range(iterations):
        threads = chooser.threads_now()
        used.append(threads)
        chooser.iteration_done(seconds(it, threads))
    return used


def test_thread_chooser_probes_and_keeps_the_faster_mode():
    chooser = ThreadChooser(2, probe_every=10, probe_len=2)
    # two threads pay in the first period, not afterwards
    used = drive(chooser, 30, lambda it, threads: 1.0 if (threads == 2) == (it < 10) else 1.5)
    # each period: 2 warm-up iterations in the current mode, 2 on one thread, 2 on two, then the faster
    assert used[:10] == [2, 2, 1, 1, 2, 2, 2, 2, 2, 2]
    assert used[10:20] == [2, 2, 1, 1, 2, 2, 1, 1, 1, 1]
    assert used[20:30] == [1, 1, 1, 1, 2, 2, 1, 1, 1, 1]
    assert chooser.chosen == 1


def test_thread_chooser_ends_a_probe_at_the_first_very_slow_iteration():
    """Under heavy load a multi-thread iteration can be 20x slower: the probe stops after the first one."""
    chooser = ThreadChooser(2, probe_every=20, probe_len=4)
    used = drive(chooser, 20, lambda it, threads: 1.0 if threads == 1 else 20.0)
    assert used[:8] == [2] * 4 + [1] * 4  # warm-up, then the one-thread half of the probe
    assert used[8] == 2 and used[9:] == [1] * 11  # one slow two-thread iteration ends it


def test_thread_chooser_one_very_slow_iteration_outweighs_fast_ones():
    """A two-thread iteration slower than twice the slowest one-thread one decides for one thread, even when
    the other two-thread iterations were fast (a core was just taken by another process)."""
    chooser = ThreadChooser(2, probe_every=20, probe_len=4)
    drive(chooser, 20, lambda it, threads: 1.0 if threads == 1 else (2.1 if it == 11 else 0.5))
    assert chooser.chosen == 1 and chooser.decisions[0][2] == 2.1


def test_thread_chooser_compares_means_over_mixed_iterations():
    """Iterations alternate cheap/expensive (TD3's actor steps): two threads make the expensive ones much
    faster and the cheap ones a little slower. The means over whole cycles say two threads pay."""
    cost = {1: (1.0, 10.0), 2: (1.3, 5.0)}  # (critic-only, actor) iteration seconds per thread count
    chooser = ThreadChooser(2, probe_every=40, probe_len=4)
    drive(chooser, 40, lambda it, threads: cost[threads][it % 2])
    assert chooser.chosen == 2
    (when, serial_mean, multi_mean, chosen), = chooser.decisions
    assert (when, serial_mean, multi_mean, chosen) == (12, 5.5, 3.15, 2)


def test_thread_chooser_fixed_mode_never_probes():
    chooser = ThreadChooser(3, adaptive=False, probe_every=10, probe_len=2)
    for _ in range(25):
        assert chooser.threads_now() == 3
        chooser.iteration_done(1.0)
    with pytest.raises(ValueError, match="probe_every"):
        ThreadChooser(2, probe_every=5, probe_len=2)


def test_run_switches_threads_restores_them_and_records_the_time(monkeypatch):
    chooser = ThreadChooser(2, adaptive=False)
    seen = []
    recorded = []
    monkeypatch.setattr(chooser, "iteration_done", recorded.append)
    outer = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert chooser.run(lambda x: (seen.append(torch.get_num_threads()), x * 2)[1], 21) == 42
        assert seen == [2] and torch.get_num_threads() == 1
        assert len(recorded) == 1 and recorded[0] >= 0.0

        def failing():
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            chooser.run(failing)
        assert torch.get_num_threads() == 1 and len(recorded) == 1  # restored; a failed iteration is not timed
    finally:
        torch.set_num_threads(outer)


def test_run_feeds_the_probe():
    """``run`` drives the same schedule as threads_now/iteration_done by hand."""
    chooser = ThreadChooser(2, probe_every=10, probe_len=2)
    used = []
    for _ in range(10):
        chooser.run(lambda: used.append(torch.get_num_threads()))
    # warm-up in the current mode, one thread, then two (a slow two-thread iteration may end the probe early)
    assert used[:5] == [2, 2, 1, 1, 2]
    assert len(chooser.decisions) == 1
    # every iteration is counted at the thread count it ran with
    assert chooser.iterations_at == {1: used.count(1), 2: used.count(2)} and sum(chooser.iterations_at.values()) == 10
