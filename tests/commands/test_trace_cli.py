"""``rlearn trace`` run as a subprocess on records written by the real recorder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlearn.trace.recorder import Tracer
from rlearn.trace.validate import check_trace_file

ROOT = Path(__file__).resolve().parents[2]


def rlearn(*args, cwd=ROOT):
    """Run ``python -m rlearn ARGS`` with the test interpreter (the project's virtualenv)."""
    return subprocess.run([sys.executable, "-m", "rlearn", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory):
    """Two ranks, four learner iterations each, recorded with the real Tracer."""
    root = tmp_path_factory.mktemp("run")
    for rank in (0, 1):
        tracer = Tracer(root, rank=rank)
        if rank == 1:
            tracer.set_clock_offset(2_500, 300)  # as the distributed start-up would record it
        for i in range(4):
            with tracer.span("collector/collect", "collector"):
                pass
            with tracer.span("learner/iteration", "learner", {"iter": i}):
                with tracer.span("learner/forward", "learner"):
                    pass
                with tracer.span("learner/backward", "learner"):
                    pass
            tracer.counter("throughput/env_steps_per_sec", 100.0 * (i + 1))
        tracer.close()
    return root


def test_cli_writes_gzip_trace_and_prints_summary(work_dir, tmp_path):
    out = tmp_path / "out.json.gz"
    done = rlearn("trace", work_dir, "-o", out)
    assert done.returncode == 0, done.stderr
    trace = check_trace_file(out)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert names == {"rank 0", "rank 1"}
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == 2 * 4 * 4
    assert sum(e["ph"] == "C" for e in trace["traceEvents"]) == 2 * 4
    assert f"wrote {out}: 32 spans, 8 counter samples, ranks 0, 1" in done.stdout
    header = next(line for line in done.stdout.splitlines() if line.startswith("phase"))
    assert header.split() == ["phase", "calls", "mean", "(ms)", "total", "(ms)", "%", "wall"]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if "/" in line.split(" ")[0]}
    assert rows["learner/iteration"][1] == "8" and rows["collector/collect"][1] == "8"
    assert "ui.perfetto.dev" in done.stdout
    assert "rank 1: clock offset 2.5 us +- 0.3 us corrected" in done.stdout
    assert "rank 0: clock offset" not in done.stdout


def test_cli_default_output_ranks_and_iterations(work_dir):
    done = rlearn("trace", work_dir, "--ranks", "1", "--from-iter", "1", "--to-iter", "2", "--no-summary")
    assert done.returncode == 0, done.stderr
    trace = json.loads((work_dir / "trace.json").read_text())
    check_trace_file(work_dir / "trace.json")
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {2}
    assert sorted(e["args"]["iter"] for e in spans if e["name"] == "learner/iteration") == [1, 2]
    assert sum(e["name"] == "collector/collect" for e in spans) == 1  # the collect between iterations 1 and 2
    assert "phase" not in done.stdout


@pytest.mark.parametrize("args, code, message", [
    (["--ranks", "0,x"], 2, "--ranks must be comma-separated integers"),
    (["--from-iter", "-3"], 2, "iteration must be >= 0"),
    (["--ranks", "7"], 1, "no records for rank(s) [7]"),
    (["--from-iter", "50"], 1, "no learner iteration in [50, last]; recorded iterations are 0..3"),
])
def test_cli_errors(work_dir, args, code, message):
    done = rlearn("trace", work_dir, *args)
    assert done.returncode == code and message in done.stderr, done.stderr


def test_cli_on_a_dir_without_records(tmp_path):
    done = rlearn("trace", tmp_path)
    assert done.returncode == 1
    assert "no trace records" in done.stderr and "RLEARN_PROFILE=1" in done.stderr
    assert not (tmp_path / "trace.json").exists()


def test_rlearn_help_lists_trace():
    done = rlearn("--help")
    assert done.returncode == 0 and "trace" in done.stdout
    done = rlearn("trace", "--help")
    assert done.returncode == 0 and "--from-iter" in done.stdout
