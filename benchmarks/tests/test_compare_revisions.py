"""benchmarks/compare_revisions.py: each side's worker times real learner iterations of every algorithm."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compare_revisions import _iteration, worker  # noqa: E402


@pytest.mark.parametrize("algo", ["monitor", "dqn", "ppo"])
def test_an_iteration_trains_the_learner_and_is_timed(algo):
    learner, data = _iteration(algo)
    learner.train(data())
    assert learner.train_iter == 1
    assert learner.monitor.keys()  # the iteration went through the metric path
    assert worker(algo, 2)["s_per_iter"] > 0
