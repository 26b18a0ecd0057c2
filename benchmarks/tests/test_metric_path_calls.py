"""benchmarks/metric_path_calls.py: one log stays at most 6 Python calls per key inside the metric path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metric_path_calls import count_calls  # noqa: E402


@pytest.mark.parametrize("extra_keys", [5, 23])
def test_a_log_costs_at_most_six_calls_per_key(extra_keys):
    calls, shown = count_calls(extra_keys)
    assert shown >= extra_keys + 5  # DQN's declared keys as well
    assert calls["rlearn/monitor/tick_monitor.py:window_stat"] == shown  # every key is read, once
    assert sum(calls.values()) / shown <= 6.0, calls.most_common(10)
