"""rlearn.trace merge / lanes / summary / validate on hand-written records with exact numbers."""

from __future__ import annotations

import gzip
import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.trace.lanes import assign_lanes, lane_label
from rlearn.trace.merge import Interval, TraceMergeError, merge_work_dir, select_iterations, write_trace
from rlearn.trace.summary import format_summary, summarize, wall_time_ns
from rlearn.trace.validate import TraceValidationError, check_trace, check_trace_file, validate_trace

MS = 1_000_000  # ns


def write_rank(work_dir: Path, rank: int, spans=(), counters=(), *, wall=10**18, mono=5 * 10**12, offset=None,
               pid=None, append=False):
    """Write a records file: ``spans`` as (name, lane, start_ns, end_ns, args, tid) relative to ``mono``."""
    path = work_dir / "trace" / f"rank{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "header", "version": 1, "rank": rank, "pid": pid or 1000 + rank, "hostname": f"host{rank}",
              "anchor_wall_ns": wall, "anchor_mono_ns": mono}
    lines = [header]
    if offset is not None:
        lines.append({"type": "clock_offset", "offset_ns": offset[0], "error_ns": offset[1]})
    for span in spans:
        name, lane, start, end = span[:4]
        record = {"type": "span", "name": name, "lane": lane, "start": mono + start, "end": mono + end,
                  "tid": span[5] if len(span) > 5 else 7}
        if len(span) > 4 and span[4]:
            record["args"] = span[4]
        lines.append(record)
    for name, t, value in counters:
        lines.append({"type": "counter", "name": name, "t": mono + t, "value": value})
    with open(path, "a" if append else "w") as handle:
        handle.write("".join(json.dumps(line) + "\n" for line in lines))
    return path


def x_events(trace, **match):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and all(e.get(k) == v for k, v in match.items())]


def thread_names(trace):
    return {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


# ------------------------------------------------------------------------------------------ merge basics
def test_merge_single_rank_exact_times_metadata_and_counters(tmp_path):
    write_rank(tmp_path, 0, spans=[
        ("collector/collect", "collector", 1 * MS, 3 * MS),
        ("learner/iteration", "learner", 3 * MS, 9 * MS, {"iter": 0}),
        ("learner/forward", "learner", 3 * MS + 500, 5 * MS),
        ("learner/backward", "learner", 5 * MS, 8 * MS),
    ], counters=[("throughput/env_steps_per_sec", 9 * MS, 250.5)])
    result = merge_work_dir(tmp_path)
    trace = result.trace
    assert check_trace(trace) is None
    assert trace["displayTimeUnit"] == "ms"
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 0"}} in meta
    assert {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 0}} in meta
    assert thread_names(trace) == {(1, 2): "collector", (1, 3): "learner"}
    by_name = {e["name"]: e for e in x_events(trace)}
    assert by_name["collector/collect"] == {"ph": "X", "name": "collector/collect", "cat": "collector", "pid": 1,
                                            "tid": 2, "ts": 0.0, "dur": 2000.0}
    assert (by_name["learner/iteration"]["ts"], by_name["learner/iteration"]["dur"]) == (2000.0, 6000.0)
    assert by_name["learner/iteration"]["args"] == {"iter": 0}
    assert (by_name["learner/forward"]["ts"], by_name["learner/forward"]["dur"]) == (2000.5, 1999.5)
    assert {e["tid"] for e in x_events(trace, cat="learner")} == {3}  # nested spans stay on one lane
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert counters == [{"ph": "C", "name": "throughput/env_steps_per_sec", "pid": 1, "ts": 8000.0, "args": {"value": 250.5}}]
    assert "host0" in trace["otherData"]["rank 0"]


def test_overlapping_intervals_move_to_extra_lanes_nested_ones_stay(tmp_path):
    write_rank(tmp_path, 0, spans=[
        ("learner/iteration", "learner", 0, 10 * MS, {"iter": 0}),
        ("learner/forward", "learner", 1 * MS, 4 * MS),        # nested in the iteration
        ("learner/prefetch", "learner", 8 * MS, 14 * MS),      # overlaps the iteration's end: not nested
        ("learner/iteration", "learner", 12 * MS, 20 * MS, {"iter": 1}),  # overlaps the prefetch
        ("learner/forward", "learner", 13 * MS, 15 * MS),      # nested in iteration 1
        ("learner/late", "learner", 9 * MS, 15 * MS),          # overlaps both lane-0 and lane-1 spans
    ])
    trace = merge_work_dir(tmp_path).trace
    assert validate_trace(trace) == []
    names = thread_names(trace)
    lane_of = {(e["name"], e["ts"]): names[(e["pid"], e["tid"])] for e in x_events(trace)}
    assert lane_of == {
        ("learner/iteration", 0.0): "learner", ("learner/forward", 1000.0): "learner",
        ("learner/prefetch", 8000.0): "learner (2)",
        ("learner/late", 9000.0): "learner (3)",
        ("learner/iteration", 12000.0): "learner", ("learner/forward", 13000.0): "learner",
    }


def test_spans_of_different_threads_never_nest(tmp_path):
    write_rank(tmp_path, 0, spans=[
        ("evaluator/evaluate", "evaluator", 0, 10 * MS, None, 11),  # thread 11
        ("evaluator/episode", "evaluator", 1 * MS, 2 * MS, None, 11),  # thread 11, nested: stays
        ("evaluator/evaluate", "evaluator", 3 * MS, 4 * MS, None, 22),  # thread 22 inside thread 11's span
    ])
    trace = merge_work_dir(tmp_path).trace
    names = thread_names(trace)
    lanes = sorted((e["name"], names[(e["pid"], e["tid"])]) for e in x_events(trace))
    assert lanes == [("evaluator/episode", "evaluator"), ("evaluator/evaluate", "evaluator"),
                     ("evaluator/evaluate", "evaluator (2)")]


def test_two_ranks_with_known_clock_offset_come_out_aligned(tmp_path):
    # Rank 1's wall clock runs 5 ms ahead of rank 0's; its monotonic clock has another origin.
    # Both ranks do a barrier that really happens at rank-0 wall time 10**18 + 2 ms.
    write_rank(tmp_path, 0, spans=[("dist/barrier", "learner", 2 * MS, 3 * MS)], wall=10**18, mono=7 * 10**12)
    write_rank(tmp_path, 1, spans=[("dist/barrier", "learner", 4 * MS, 5 * MS)],
               wall=10**18 + 5 * MS - 2 * MS, mono=123, offset=(5 * MS, 20_000))
    result = merge_work_dir(tmp_path)
    events = sorted(x_events(result.trace), key=lambda e: e["pid"])
    assert [(e["pid"], e["ts"], e["dur"]) for e in events] == [(1, 0.0, 1000.0), (2, 0.0, 1000.0)]
    assert [(r.rank, r.clock_offset_ns, r.clock_error_ns) for r in result.ranks] == [(0, 0, 0), (1, 5 * MS, 20_000)]
    # pids are ranks + 1 with names and sort order; tids are unique over the trace and differ from every pid
    meta = {(e["name"], e["pid"]): e["args"] for e in result.trace["traceEvents"] if e["ph"] == "M"
            and e["name"].startswith("process")}
    assert meta[("process_name", 2)] == {"name": "rank 1"} and meta[("process_sort_index", 2)] == {"sort_index": 1}
    tids = [tid for (_, tid) in thread_names(result.trace)]
    assert len(set(tids)) == len(tids) and not set(tids) & {1, 2}


def test_uncorrected_offset_would_misalign(tmp_path):
    """Control for the test above: without the offset record the same spans are 5 ms apart."""
    write_rank(tmp_path, 0, spans=[("dist/barrier", "learner", 2 * MS, 3 * MS)], wall=10**18, mono=7 * 10**12)
    write_rank(tmp_path, 1, spans=[("dist/barrier", "learner", 4 * MS, 5 * MS)], wall=10**18 + 3 * MS, mono=123)
    events = sorted(x_events(merge_work_dir(tmp_path).trace), key=lambda e: e["pid"])
    assert [e["ts"] for e in events] == [0.0, 5000.0]


def test_rank_selection(tmp_path):
    write_rank(tmp_path, 0, spans=[("a/x", "a", 0, MS)])
    write_rank(tmp_path, 1, spans=[("a/x", "a", 0, MS)])
    write_rank(tmp_path, 2, spans=[("a/x", "a", 0, MS)])
    result = merge_work_dir(tmp_path, ranks=[2, 0])
    assert sorted({e["pid"] for e in x_events(result.trace)}) == [1, 3]
    assert validate_trace(result.trace) == []
    with pytest.raises(TraceMergeError, match=r"rank\(s\) \[5\]; available ranks: \[0, 1, 2\]"):
        merge_work_dir(tmp_path, ranks=[5])


def test_resumed_sessions_and_torn_lines_merge(tmp_path):
    path = write_rank(tmp_path, 0, spans=[("learner/iteration", "learner", 0, MS, {"iter": 0})])
    with open(path, "a") as handle:
        handle.write('{"type":"span","name":"learner/it')  # killed mid-write
    with open(path, "a") as handle:
        handle.write("\n")
    write_rank(tmp_path, 0, spans=[("learner/iteration", "learner", 0, MS, {"iter": 1})],
               wall=10**18 + 60_000 * MS, mono=42, append=True)
    result = merge_work_dir(tmp_path)
    assert result.torn_lines == 1
    assert [(e["args"]["iter"], e["ts"]) for e in x_events(result.trace)] == [(0, 0.0), (1, 60_000_000.0)]


def test_missing_records_give_clear_errors(tmp_path):
    with pytest.raises(TraceMergeError, match="does not exist"):
        merge_work_dir(tmp_path / "nope")
    with pytest.raises(TraceMergeError, match="profile=True or RLEARN_PROFILE=1"):
        merge_work_dir(tmp_path)
    (tmp_path / "trace").mkdir()
    with pytest.raises(TraceMergeError, match="no rank<r>.jsonl files"):
        merge_work_dir(tmp_path)


def test_trace_folder_itself_is_accepted(tmp_path):
    write_rank(tmp_path, 0, spans=[("a/x", "a", 0, MS)])
    assert len(merge_work_dir(tmp_path / "trace").intervals) == 1


# ------------------------------------------------------------------------------------------ iterations
def iteration_run(tmp_path):
    spans = []
    for i in range(5):  # iteration i: collect [10i, 10i+2] ms, iteration [10i+2, 10i+9] ms with a forward
        base = 10 * i * MS
        spans += [("collector/collect", "collector", base, base + 2 * MS),
                  ("learner/iteration", "learner", base + 2 * MS, base + 9 * MS, {"iter": i}),
                  ("learner/forward", "learner", base + 3 * MS, base + 4 * MS)]
    spans.append(("evaluator/eval", "evaluator", 49 * MS, 60 * MS, {"iter": 1}))  # an annotation, not a window
    write_rank(tmp_path, 0, spans=spans, counters=[("fps", 10 * i * MS + 9 * MS, float(i)) for i in range(5)])


def test_iteration_filter_keeps_what_lies_inside_the_iterations(tmp_path):
    iteration_run(tmp_path)
    result = merge_work_dir(tmp_path, from_iter=1, to_iter=2)
    kept = sorted((i.name, (i.start - result.intervals[0].start) // MS) for i in result.intervals)
    # window: start of iter 1 (12 ms) .. end of iter 2 (29 ms); the collect at 20 ms lies inside it
    assert kept == [("collector/collect", 8), ("learner/forward", 1), ("learner/forward", 11),
                    ("learner/iteration", 0), ("learner/iteration", 10)]
    # the sample at 9 ms (0.0) is the counter's value when the window opens: kept, at the window's start
    assert [(c.value, (c.t - result.intervals[0].start) // MS) for c in result.counters] == [(0.0, 0), (1.0, 7),
                                                                                             (2.0, 17)]
    assert validate_trace(result.trace) == []
    assert min(e["ts"] for e in x_events(result.trace)) == 0.0  # times restart at the window
    assert {(i.name, i.args.get("iter")) for i in merge_work_dir(tmp_path, from_iter=3).intervals} == {
        ("collector/collect", None), ("learner/forward", None), ("learner/iteration", 3), ("learner/iteration", 4)}
    assert {i.args.get("iter") for i in merge_work_dir(tmp_path, to_iter=0).intervals} == {0, None}


def test_iteration_filter_keeps_the_throughput_counters_of_the_selected_iterations(tmp_path):
    """As the learner records them: a log after iterations 2, 4 and 6 stamps the rate of the iterations since the
    previous log at that previous log (the interval's start), i.e. between two iteration spans."""
    spans, counters = [], []
    for i in range(1, 7):  # iteration i: [10i, 10i+8] ms; the log after it at 10i+9 ms
        spans.append(("learner/iteration", "learner", 10 * i * MS, (10 * i + 8) * MS, {"iter": i}))
    for log, since in ((2, 0), (4, 29), (6, 49)):  # iterations 1-2, 3-4, 5-6; rate = 100 x the log's iteration
        counters.append(("throughput/iters_per_sec", since * MS, 100.0 * log))
    write_rank(tmp_path, 0, spans=spans, counters=counters)
    selected = merge_work_dir(tmp_path, from_iter=3, to_iter=4)
    assert [(c.name, c.value) for c in selected.counters] == [("throughput/iters_per_sec", 400.0)]
    assert selected.counters[0].t == selected.intervals[0].start  # shown from the window's start
    assert [c.value for c in merge_work_dir(tmp_path, from_iter=3, to_iter=6).counters] == [400.0, 600.0]
    assert [c.value for c in merge_work_dir(tmp_path, from_iter=1, to_iter=2).counters] == [200.0]
    assert validate_trace(selected.trace) == []


def test_iteration_filter_errors(tmp_path):
    iteration_run(tmp_path)
    with pytest.raises(TraceMergeError, match=r"no learner iteration in \[7, 9\]; recorded iterations are 0..4"):
        merge_work_dir(tmp_path, from_iter=7, to_iter=9)
    with pytest.raises(TraceMergeError, match="after"):
        merge_work_dir(tmp_path, from_iter=3, to_iter=1)
    plain = [Interval(0, "a", "a/x", 0, 5), Interval(0, "evaluator", "evaluator/eval", 0, 5, {"iter": 0})]
    with pytest.raises(TraceMergeError, match="no span on the 'learner' lane carries an 'iter' arg"):
        select_iterations(plain, [], 0, 1)
    assert select_iterations(plain, [], None, None) == (plain, [])


# ------------------------------------------------------------------------------------------ lanes
def is_nested_family(intervals):
    """Naive reference: every pair is disjoint/touching or one contains the other."""
    for (s1, e1), (s2, e2) in itertools.combinations(intervals, 2):
        disjoint = e1 <= s2 or e2 <= s1
        contains = (s1 <= s2 and e2 <= e1) or (s2 <= s1 and e1 <= e2)
        if not (disjoint or contains):
            return False
    return True


interval_lists = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)).map(lambda p: (p[0], p[0] + p[1])),
                          max_size=25)


@settings(max_examples=150, deadline=None)
@given(interval_lists)
def test_assign_lanes_gives_nested_sub_lanes_first_fit(intervals):
    lanes = assign_lanes(intervals)
    assert len(lanes) == len(intervals)
    for lane in set(lanes):
        assert is_nested_family([iv for iv, ln in zip(intervals, lanes) if ln == lane])
    # first fit: an interval on lane k could not join any lower lane's intervals that were placed before it
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], -intervals[i][1], i))
    position = {index: n for n, index in enumerate(order)}
    for i, lane in enumerate(lanes):
        for lower in range(lane):
            earlier = [intervals[j] for j in range(len(intervals))
                       if lanes[j] == lower and position[j] < position[i]]
            assert not is_nested_family(earlier + [intervals[i]])
    if is_nested_family(intervals):
        assert set(lanes) <= {0}


@settings(max_examples=100, deadline=None)
@given(interval_lists, st.data())
def test_assign_lanes_with_groups_never_nests_across_groups(intervals, data):
    groups = data.draw(st.lists(st.sampled_from("ab"), min_size=len(intervals), max_size=len(intervals)))
    lanes = assign_lanes(intervals, groups)
    for (i, a), (j, b) in itertools.combinations(enumerate(intervals), 2):
        if lanes[i] == lanes[j]:
            assert is_nested_family([a, b])
            if groups[i] != groups[j]:
                assert a[1] <= b[0] or b[1] <= a[0]  # other threads' spans only share a lane when disjoint


def test_assign_lanes_edge_cases():
    assert assign_lanes([]) == []
    assert assign_lanes([(0, 5), (5, 9), (5, 5), (0, 5)]) == [0, 0, 0, 0]  # touching, zero-length, identical
    assert assign_lanes([(0, 5), (3, 8), (6, 10)]) == [0, 1, 0]
    with pytest.raises(ValueError, match="interval 1 ends before it starts"):
        assign_lanes([(0, 1), (5, 2)])
    with pytest.raises(ValueError, match="groups"):
        assign_lanes([(0, 1)], ["a", "b"])
    assert [lane_label("learner", k) for k in range(3)] == ["learner", "learner (2)", "learner (3)"]


# ------------------------------------------------------------------------------------------ summary
def test_summary_numbers_are_exact(tmp_path):
    write_rank(tmp_path, 0, spans=[
        ("learner/iteration", "learner", 0, 6 * MS),
        ("learner/forward", "learner", 1 * MS, 2 * MS),
        ("learner/iteration", "learner", 6 * MS, 10 * MS),
        ("learner/forward", "learner", 7 * MS, 10 * MS),
        ("collector/collect", "collector", 10 * MS, 12 * MS),
    ])
    write_rank(tmp_path, 1, spans=[("learner/iteration", "learner", 0, 8 * MS)])
    rows = summarize(merge_work_dir(tmp_path).intervals)
    # wall: rank 0 spans 0..12 ms, rank 1 0..8 ms -> 20 ms
    assert [(r.name, r.calls, r.total_ns, r.mean_ns, r.percent_of_wall) for r in rows] == [
        ("learner/iteration", 3, 18 * MS, 6 * MS, 90.0),
        ("learner/forward", 2, 4 * MS, 2 * MS, 20.0),
        ("collector/collect", 1, 2 * MS, 2 * MS, 10.0),
    ]
    table = format_summary(rows).splitlines()
    assert table[0].split() == ["phase", "calls", "mean", "(ms)", "total", "(ms)", "%", "wall"]
    assert table[2].split() == ["learner/iteration", "3", "6.000", "18.000", "90.0"]
    assert table[4].split() == ["collector/collect", "1", "2.000", "2.000", "10.0"]
    assert format_summary([]) == "(no spans recorded)"
    assert wall_time_ns([]) == 0


# ------------------------------------------------------------------------------------------ files
def test_gzip_round_trip_single_stream(tmp_path):
    write_rank(tmp_path, 0, spans=[("a/x", "a", 0, MS, {"iter": 0})], counters=[("fps", MS, 3.0)])
    trace = merge_work_dir(tmp_path).trace
    gz = write_trace(trace, tmp_path / "out" / "trace.json.gz")
    raw = gz.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert json.loads(gzip.decompress(raw)) == trace == check_trace_file(gz)
    plain = write_trace(trace, tmp_path / "trace.json")
    assert json.loads(plain.read_text()) == trace == check_trace_file(plain)
    assert not list(tmp_path.rglob("*.partial"))


def test_file_level_problems(tmp_path):
    good = json.dumps({"traceEvents": []}).encode()
    cases = {
        "two.json.gz": (gzip.compress(good) + gzip.compress(good), "more than one gzip stream"),
        "cut.json.gz": (gzip.compress(good)[:-6], "truncated"),
        "plain.json.gz": (good, "not gzip"),
        "zipped.json": (gzip.compress(good), "does not end in .gz"),
        "bad.json": (b'{"traceEvents": [', "not valid JSON"),
    }
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(TraceValidationError, match=message) as caught:
            check_trace_file(tmp_path / name)
        assert len(caught.value.problems) == 1 and message in caught.value.problems[0], (name, caught.value.problems)


# ------------------------------------------------------------------------------------------ validator
def good_trace():
    return {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 0"}},
        {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "learner"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 2, "args": {"sort_index": 2}},
        {"ph": "X", "name": "it", "pid": 1, "tid": 2, "ts": 0.0, "dur": 10.0},
        {"ph": "X", "name": "fw", "pid": 1, "tid": 2, "ts": 1.0, "dur": 4.0},
        {"ph": "X", "name": "bw", "pid": 1, "tid": 2, "ts": 5.0, "dur": 5.0},  # ends with its parent
        {"ph": "X", "name": "next", "pid": 1, "tid": 2, "ts": 10.0, "dur": 0.0},  # touches
        {"ph": "C", "name": "fps", "pid": 1, "ts": 3.0, "args": {"value": 2.5}},
    ], "displayTimeUnit": "ms"}


def mutate(path, value):
    trace = good_trace()
    target = trace
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return trace


BAD_TRACES = {
    "phase B not allowed": (mutate(("traceEvents", 4, "ph"), "B"), "phase must be one of"),
    "negative ts": (mutate(("traceEvents", 5, "ts"), -1.0), "ts must be a finite number >= 0"),
    "nan dur": (mutate(("traceEvents", 5, "dur"), math.nan), "dur must be a finite number >= 0"),
    "inf ts": (mutate(("traceEvents", 8, "ts"), math.inf), "ts must be a finite number >= 0"),
    "missing dur": (mutate(("traceEvents", 5, "dur"), KeyError), "dur must be"),
    "float pid": (mutate(("traceEvents", 4, "pid"), 1.0), "pid must be a positive integer"),
    "string tid": (mutate(("traceEvents", 4, "tid"), "2"), "tid must be a positive integer"),
    "bool pid": (mutate(("traceEvents", 8, "pid"), True), "pid must be a positive integer"),
    "pid zero": (mutate(("traceEvents", 4, "pid"), 0), "pid must be a positive integer"),
    "missing process name": (mutate(("traceEvents", 0, "name"), "process_labels"), "metadata name must be"),
    "no process_name": (mutate(("traceEvents", 0, "pid"), 9), "pid 1 has no process_name"),
    "no thread_name": (mutate(("traceEvents", 2, "tid"), 3), "pid 1 tid 2 has no thread_name"),
    "overlap": (mutate(("traceEvents", 6, "dur"), 6.0), "overlaps"),
    "counter text": (mutate(("traceEvents", 8, "args"), {"value": "fast"}), "counter args must be finite"),
    "counter nan": (mutate(("traceEvents", 8, "args"), {"value": math.nan}), "counter args must be finite"),
    "counter no args": (mutate(("traceEvents", 8, "args"), {}), "counter needs a non-empty"),
    "sort index text": (mutate(("traceEvents", 1, "args"), {"sort_index": "0"}), "sort_index must be an integer"),
    "empty thread name": (mutate(("traceEvents", 2, "args"), {"name": ""}), "args.name must be a non-empty"),
    "unit": (mutate(("displayTimeUnit",), "s"), "displayTimeUnit"),
    "no name": (mutate(("traceEvents", 4, "name"), KeyError), "non-empty string 'name'"),
    "event not object": (mutate(("traceEvents", 4), [1]), "not an object"),
}


def test_validator_accepts_a_good_trace():
    assert validate_trace(good_trace()) == []
    check_trace(good_trace())


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_validator_rejects_each_kind_of_bad_trace(case):
    trace, message = BAD_TRACES[case]
    problems = validate_trace(trace)
    assert problems and any(message in p for p in problems), problems
    with pytest.raises(TraceValidationError, match=message):
        check_trace(trace)


def test_validator_rejects_shared_tid_and_non_objects():
    trace = good_trace()
    trace["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": 5, "args": {"name": "rank 4"}},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 2, "args": {"name": "learner"}},
    ]
    assert any("tid 2 is used by pid 1 and pid 5" in p for p in validate_trace(trace))
    assert validate_trace([]) == ["trace must be a JSON object with 'traceEvents', got list"]
    assert validate_trace({"events": []}) == ["trace has no 'traceEvents' list"]


def test_nesting_is_checked_in_integer_nanoseconds():
    """A child ending a float rounding error after its parent is still nested, as the viewers see it."""
    trace = good_trace()
    trace["traceEvents"][5].update(ts=0.1, dur=0.2)          # 100 ns .. 300 ns
    trace["traceEvents"][4].update(ts=0.1, dur=0.1 + 0.1)    # 0.2000000000000000111 us
    assert validate_trace(trace) == []


def test_rank_0_is_the_reference_clock_and_gets_no_error_bound(tmp_path):
    """``rlearn trace`` prints the correction of the other ranks only; rank 0 is the clock they are corrected to."""
    import subprocess
    import sys

    write_rank(tmp_path, 0, spans=[("a/x", "a", 0, MS)], offset=(0, 4_000))  # a start-up that measured rank 0 too
    write_rank(tmp_path, 1, spans=[("a/x", "a", 0, MS)], offset=(2 * MS, 3_000))
    done = subprocess.run([sys.executable, "-m", "rlearn", "trace", str(tmp_path), "--no-summary"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "rank 1: clock offset 2000.0 us +- 3.0 us corrected" in done.stdout
    assert "rank 0: clock" not in done.stdout
    other = json.loads((tmp_path / "trace.json").read_text())["otherData"]
    assert other["rank 0"] == "host host0, pid 1000, reference clock"
    assert other["rank 1"] == f"host host1, pid 1001, clock offset {2 * MS} ns +- 3000 ns"
