"""benchmarks/run_timing.py's ``time_method``: the benchmarks split a run's time with it (bench_td3 wraps
``TD3Policy._forward_learn`` on the class, SB3's ``train`` on the instance), so a wrapped method must behave
exactly as before and its seconds must add up."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from run_timing import time_method  # noqa: E402


class _Sleeper:
    def __init__(self, name: str) -> None:
        self.name = name

    def nap(self, seconds: float, tag: str = "") -> str:
        time.sleep(seconds)
        return f"{self.name}{tag}"

    def fail(self) -> None:
        time.sleep(0.01)
        raise RuntimeError("boom")


def test_wrapping_the_class_times_every_instance_and_keeps_arguments_and_results(monkeypatch):
    monkeypatch.setattr(_Sleeper, "nap", _Sleeper.nap)  # restored after the test
    timers = {}
    time_method(_Sleeper, "nap", timers, "nap")
    assert timers == {"nap": 0.0}
    a, b = _Sleeper("a"), _Sleeper("b")
    assert a.nap(0.02, tag="!") == "a!"
    assert b.nap(0.03) == "b"
    assert 0.05 <= timers["nap"] < 1.0


def test_wrapping_an_instance_leaves_the_class_alone_and_counts_a_raising_call():
    timers = {}
    timed, plain = _Sleeper("t"), _Sleeper("p")
    time_method(timed, "fail", timers, "fail")
    time_method(timed, "nap", timers, "nap")
    for _ in range(2):
        try:
            timed.fail()
        except RuntimeError as exc:
            assert str(exc) == "boom"
    plain.nap(0.02)
    assert timers["nap"] == 0.0  # the other instance is not timed
    assert 0.02 <= timers["fail"] < 1.0
