"""rlearn.trace: the switch, the recorder and its records file (including a process killed mid-run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import rlearn.trace as trace
from rlearn.trace.merge import merge_work_dir
from rlearn.trace.recorder import Tracer, default_lane, records_path
from rlearn.trace.records import RecordsError, read_records
from rlearn.trace.validate import validate_trace


@pytest.fixture(autouse=True)
def tracing_off(monkeypatch):
    """Every test starts and ends with tracing off and no RLEARN_PROFILE."""
    monkeypatch.delenv(trace.ENV_VAR, raising=False)
    trace.disable()
    yield
    trace.disable()


def lines(work_dir, rank=0):
    return [json.loads(line) for line in records_path(work_dir, rank).read_text().splitlines()]


# ------------------------------------------------------------------------------------------ off mode
def test_off_span_is_one_shared_noop():
    assert not trace.is_enabled() and trace.get_tracer() is None
    first = trace.span("learner/forward", lane="learner")
    second = trace.span("ppg/auxiliary_phase", iter=3, loss=float("nan"))  # args are not even looked at
    assert first is second is trace.NOOP_SPAN
    with first as entered:
        assert entered is trace.NOOP_SPAN
    trace.counter("throughput/env_steps_per_sec", 1.0)  # no-op, no error
    trace.flush()


def test_off_span_does_not_swallow_exceptions():
    with pytest.raises(KeyError):
        with trace.span("learner/forward"):
            raise KeyError("boom")


# ------------------------------------------------------------------------------------------ switch
@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("ON", True), ("yes", True),
                                             ("0", False), ("", False), ("off", False), ("False", False)])
def test_is_requested_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv(trace.ENV_VAR, value)
    assert trace.is_requested() is expected
    assert trace.is_requested(True) is True  # the config flag alone switches it on


def test_is_requested_rejects_unclear_values(monkeypatch):
    monkeypatch.setenv(trace.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="RLEARN_PROFILE='maybe'"):
        trace.is_requested()
    monkeypatch.delenv(trace.ENV_VAR)
    with pytest.raises(TypeError, match="profile"):
        trace.is_requested("yes")


def test_enable_from_env(tmp_path, monkeypatch):
    assert trace.enable_from_env(tmp_path) is None and not trace.is_enabled()
    monkeypatch.setenv(trace.ENV_VAR, "1")
    tracer = trace.enable_from_env(tmp_path, rank=2)
    assert tracer is trace.get_tracer() and tracer.path == tmp_path / "trace" / "rank2.jsonl"


def test_enable_twice_same_dir_returns_running_tracer_other_dir_replaces_it(tmp_path):
    first = trace.enable(tmp_path / "a")
    assert trace.enable(tmp_path / "a") is first
    second = trace.enable(tmp_path / "b")
    assert second is not first and first.closed and trace.get_tracer() is second
    second.close()
    assert not trace.is_enabled()
    with pytest.raises(ValueError, match="rank"):
        trace.enable(tmp_path, rank=-1)


# ------------------------------------------------------------------------------------------ records
def test_header_and_spans_are_recorded(tmp_path):
    before = time.time_ns()
    trace.enable(tmp_path, rank=3)
    after = time.time_ns()
    assert trace.is_enabled()
    with trace.span("learner/iteration", iter=7):
        with trace.span("learner/forward"):
            pass
        with trace.span("gc", lane="other", note="x", flag=True, nothing=None):
            pass
    trace.disable()
    header, forward, gc_span, iteration = lines(tmp_path, 3)
    assert header["type"] == "header" and header["rank"] == 3 and header["pid"] == os.getpid()
    assert isinstance(header["hostname"], str) and header["clock"] == "perf_counter_ns"
    assert before <= header["anchor_wall_ns"] <= after
    assert forward == {"type": "span", "name": "learner/forward", "lane": "learner",
                       "start": forward["start"], "end": forward["end"], "tid": forward["tid"]}
    assert gc_span["lane"] == "other" and gc_span["args"] == {"note": "x", "flag": True, "nothing": None}
    assert iteration["args"] == {"iter": 7} and iteration["lane"] == "learner"
    assert iteration["start"] <= forward["start"] <= forward["end"] <= gc_span["start"] <= iteration["end"]
    assert header["anchor_mono_ns"] <= iteration["start"]


def test_default_lane_is_the_name_prefix():
    assert default_lane("learner/forward") == "learner"
    assert default_lane("ppg/auxiliary_phase/x") == "ppg"
    assert default_lane("checkpoint") == "main" and default_lane("/odd") == "main"


def test_span_whose_body_raises_is_recorded_with_error(tmp_path):
    trace.enable(tmp_path)
    with pytest.raises(RuntimeError, match="diverged"):
        with trace.span("learner/backward", iter=2):
            raise RuntimeError("diverged")
    with pytest.raises(ZeroDivisionError):
        with trace.span("learner/forward"):
            1 / 0
    trace.disable()
    _, backward, forward = lines(tmp_path)
    assert backward["args"] == {"iter": 2, "error": "RuntimeError"}
    assert forward["args"] == {"error": "ZeroDivisionError"}


def test_numpy_and_tensor_args_and_counters_are_converted(tmp_path):
    trace.enable(tmp_path)
    with trace.span("learner/forward", batch=np.int64(256), loss=torch.tensor(0.5), lr=np.float32(0.25)):
        pass
    trace.counter("throughput/env_steps_per_sec", np.float64(1234.5))
    trace.counter("throughput/iters_per_sec", torch.tensor([12]))
    trace.counter("int_counter", 3)
    trace.disable()
    _, span_record, c1, c2, c3 = lines(tmp_path)
    assert span_record["args"] == {"batch": 256, "loss": 0.5, "lr": 0.25}
    assert (c1["name"], c1["value"]) == ("throughput/env_steps_per_sec", 1234.5)
    assert (c2["name"], c2["value"]) == ("throughput/iters_per_sec", 12.0)
    assert c3["value"] == 3.0 and c1["t"] <= c2["t"] <= c3["t"]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"loss": float("nan")}, ValueError, "'learner/forward': arg 'loss' is not finite"),
    ({"obj": object()}, TypeError, "arg 'obj' must be"),
    ({"vec": torch.zeros(3)}, TypeError, "arg 'vec' must be a scalar"),
])
def test_bad_span_args_raise_naming_the_arg_and_keep_earlier_records(tmp_path, kwargs, error, match):
    trace.enable(tmp_path)
    with trace.span("collector/collect"):
        pass
    with pytest.raises(error, match=match):
        trace.span("learner/forward", **kwargs)
    trace.disable()
    assert [r["name"] for r in lines(tmp_path)[1:]] == ["collector/collect"]


def test_bad_names_and_counter_values_raise(tmp_path):
    trace.enable(tmp_path)
    with pytest.raises(TypeError, match="span name"):
        trace.span("")
    with pytest.raises(TypeError, match="lane"):
        trace.span("x", lane=3)
    with pytest.raises(TypeError, match="must be strings"):
        trace.span(["x"])
    with pytest.raises(ValueError, match="counter .throughput/env_steps_per_sec.: value is not finite"):
        trace.counter("throughput/env_steps_per_sec", float("inf"))
    with pytest.raises(TypeError, match="counter 'fps': value must be a real number, got str"):
        trace.counter("fps", "fast")
    with pytest.raises(TypeError, match="counter 'fps'"):
        trace.counter("fps", True)
    with pytest.raises(TypeError, match="several elements"):
        trace.counter("fps", np.ones(2))
    with pytest.raises(TypeError, match="counter name"):
        trace.counter("", 1.0)


def test_records_are_batched_and_flushed(tmp_path):
    tracer = trace.enable(tmp_path, flush_every=3, flush_interval=3600)
    for _ in range(2):
        with trace.span("learner/forward"):
            pass
    assert len(lines(tmp_path)) == 1  # header only: two records still buffered
    with trace.span("learner/forward"):
        pass
    assert len(lines(tmp_path)) == 4  # the third record wrote the batch
    trace.counter("fps", 1.0)
    assert len(lines(tmp_path)) == 4
    trace.flush()
    assert len(lines(tmp_path)) == 5
    trace.counter("fps", 2.0)
    trace.disable()  # closing writes the rest
    assert len(lines(tmp_path)) == 6 and tracer.closed
    tracer.counter("fps", 3.0)  # a closed tracer ignores records
    assert len(lines(tmp_path)) == 6


def test_time_based_flush(tmp_path):
    trace.enable(tmp_path, flush_every=10_000, flush_interval=0)
    with trace.span("learner/forward"):
        pass
    assert len(lines(tmp_path)) == 2  # interval 0: every record is written at once


def test_clock_offset_before_and_after_enable(tmp_path):
    trace.set_clock_offset(5_000, 40)
    trace.enable(tmp_path)
    header = lines(tmp_path)[0]
    assert (header["clock_offset_ns"], header["clock_error_ns"]) == (5_000, 40)
    trace.set_clock_offset(-7_000, 12)  # written and flushed at once
    assert lines(tmp_path)[-1] == {"type": "clock_offset", "offset_ns": -7_000, "error_ns": 12}
    trace.disable()
    session = read_records(records_path(tmp_path, 0)).sessions[0]
    assert (session.clock_offset_ns, session.clock_error_ns) == (-7_000, 12)
    with pytest.raises(ValueError, match="error_ns"):
        trace.set_clock_offset(0, -1)
    with pytest.raises(TypeError, match="offset_ns"):
        trace.set_clock_offset(1.5, 0)


def test_resumed_run_appends_a_second_session(tmp_path):
    trace.enable(tmp_path)
    with trace.span("learner/iteration", iter=0):
        pass
    trace.disable()
    trace.enable(tmp_path)
    with trace.span("learner/iteration", iter=1):
        pass
    trace.disable()
    sessions = read_records(records_path(tmp_path, 0)).sessions
    assert [[s["args"]["iter"] for s in session.spans] for session in sessions] == [[0], [1]]


def test_spans_from_threads_carry_their_thread_id(tmp_path):
    import threading

    trace.enable(tmp_path)
    seen = {}

    def work():
        seen["tid"] = threading.get_native_id()
        with trace.span("evaluator/evaluate"):
            pass

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    trace.disable()
    assert lines(tmp_path)[1]["tid"] == seen["tid"] != threading.get_native_id()


def test_concurrent_threads_lose_and_duplicate_nothing(tmp_path):
    """Appends are lock-free; batches written by whichever thread fills them never drop or repeat a line."""
    import threading

    trace.enable(tmp_path, flush_every=7, flush_interval=3600)
    per_thread = 2000

    def work(worker):
        for i in range(per_thread):
            with trace.span("collector/collect", worker=worker, i=i):
                pass

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    trace.disable()
    spans = lines(tmp_path)[1:]
    assert sorted((s["args"]["worker"], s["args"]["i"]) for s in spans) == [
        (w, i) for w in range(4) for i in range(per_thread)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_write_parent_records(tmp_path):
    trace.enable(tmp_path, flush_every=10_000, flush_interval=3600)
    with trace.span("learner/forward"):
        pass  # buffered in the parent when the child is forked
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: tracing is off, and the parent's buffer is never written from here
        try:
            ok = not trace.is_enabled() and trace.span("x") is trace.NOOP_SPAN
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    assert os.read(read_end, 1) == b"1"
    os.waitpid(pid, 0)
    trace.disable()
    assert [r["type"] for r in lines(tmp_path)] == ["header", "span"]


# ------------------------------------------------------------------------------------------ reading
def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


HEADER = '{"type":"header","rank":0,"pid":1,"anchor_wall_ns":0,"anchor_mono_ns":0}\n'
SPAN = '{"type":"span","name":"a/b","lane":"a","start":1,"end":2}\n'


def test_torn_last_line_is_tolerated(tmp_path):
    path = tmp_path / "rank0.jsonl"
    _write(path, HEADER + SPAN + '{"type":"span","name":"a/b","la')
    records = read_records(path)
    assert records.torn_lines == 1 and len(records.sessions[0].spans) == 1


def test_torn_line_before_a_new_session_is_tolerated(tmp_path):
    path = tmp_path / "rank0.jsonl"
    _write(path, HEADER + '{"type":"sp\n' + HEADER + SPAN)
    records = read_records(path)
    assert records.torn_lines == 1 and [len(s.spans) for s in records.sessions] == [0, 1]


def test_tracer_appending_after_a_torn_line_starts_on_a_new_line(tmp_path):
    path = records_path(tmp_path, 0)
    _write(path, HEADER + '{"type":"span","na')
    Tracer(tmp_path).close()
    records = read_records(path)
    assert records.torn_lines == 1 and len(records.sessions) == 2


@pytest.mark.parametrize("text, match", [
    (HEADER + "garbage\n" + SPAN, r"rank0.jsonl:2: unreadable record"),
    (SPAN, r"rank0.jsonl:1: record before any header"),
    (HEADER + '{"type":"span","name":"a","lane":"a","start":5,"end":2}\n', "ends before it starts"),
    (HEADER + '{"type":"span","name":"a","lane":"a","start":"5","end":6}\n', "'start' must be an integer"),
    (HEADER + '{"type":"counter","name":"c","t":1,"value":"x"}\n', "counter value must be a finite number"),
    (HEADER + '{"type":"mystery"}\n', "unknown record type 'mystery'"),
    ('{"type":"header","rank":0}\n', "header lacks integer field"),
    (HEADER.replace('"rank"', '"version":99,"rank"'), "version 99 is newer"),
    (HEADER + "[1, 2]\n" + SPAN, "rank0.jsonl:2"),
])
def test_corrupt_records_raise_naming_file_and_line(tmp_path, text, match):
    path = tmp_path / "rank0.jsonl"
    _write(path, text)
    with pytest.raises(RecordsError, match=match):
        read_records(path)


# ------------------------------------------------------------------------------------------ crash
CHILD = textwrap.dedent("""
    import sys, time
    import rlearn.trace as trace
    trace.enable(sys.argv[1], rank=0, flush_every=4, flush_interval=3600)
    for i in range(10):
        with trace.span("learner/iteration", iter=i):
            with trace.span("learner/forward"):
                pass
    trace.flush()
    print("ready", flush=True)
    i = 10
    while True:  # keeps recording (and writing every 4 records) until killed
        with trace.span("learner/iteration", iter=i):
            with trace.span("learner/forward"):
                time.sleep(0.0005)
        i += 1
""")


def test_process_killed_mid_run_still_yields_a_readable_trace(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    result = merge_work_dir(tmp_path)
    assert validate_trace(result.trace) == []
    iterations = sorted(i.args["iter"] for i in result.intervals if i.name == "learner/iteration")
    assert iterations[:10] == list(range(10))  # everything flushed before the kill is there
    assert iterations == list(range(len(iterations)))  # and nothing in between is lost


# ------------------------------------------------------------------------------------------ arg encoding
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

scalars = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=8), st.booleans(), st.none())


def test_fast_arg_encoding_matches_json(tmp_path):
    tracer = Tracer(tmp_path)

    @settings(max_examples=150, deadline=None)
    @given(st.dictionaries(st.text(min_size=1, max_size=6), scalars, min_size=1, max_size=5))
    def check(args):
        assert json.loads(tracer._encode_args("learner/forward", args)) == args

    try:
        check()
    finally:
        tracer.close()


def test_counter_sample_at_a_given_time(tmp_path):
    """A rate measured over an interval is stamped at the interval's start (a viewer holds a counter's
    value from its sample to the next); a time in the future or not an int is refused, naming the counter."""
    from rlearn.trace.recorder import MONOTONIC_CLOCK

    trace.enable(tmp_path)
    start = MONOTONIC_CLOCK()
    trace.counter("throughput/iters_per_sec", 4.0, start)
    for bad in (MONOTONIC_CLOCK() + 10**12, 1.5, True):
        with pytest.raises(ValueError, match="counter 'throughput/iters_per_sec': t must be"):
            trace.counter("throughput/iters_per_sec", 4.0, bad)
    trace.disable()
    counters = [r for r in lines(tmp_path) if r["type"] == "counter"]
    assert [(c["name"], c["t"], c["value"]) for c in counters] == [("throughput/iters_per_sec", start, 4.0)]
