"""``rlearn sweep`` (local launcher) when things go wrong: a run's config error, two sweeps on one dir, absurd
seed ranges, a damaged ``sweep.json``, an unusable ``--out``, a full disk; and its printed follow-up commands,
which must paste and run without an activated venv (CLI as a subprocess, as a user runs it)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlearn.cli import main
from rlearn.experiments.child import ExperimentError
from rlearn.experiments.sweep import MAX_SEEDS, Sweep, parse_seeds
from test_experiments_sweep import wait_for  # tests/experiments/ is on sys.path (pytest's rootdir insertion)

#: runs of a few seconds: two evaluations of one episode
TINY = ["train.max_env_steps=2048", "eval.freq=1024", "eval.episodes=1", "eval.num_envs=1", "learner.log_freq=2"]


def sweep_argv(out: Path, seeds: str, *extra: str, jobs: int = 2):
    return ["sweep", "ppo_cartpole", "--seeds", seeds, "--jobs", str(jobs), "--out", str(out), "--no-progress",
            "--set", *TINY, *extra]


def without_venv() -> dict:
    """The environment of a shell where the venv is not activated: its bin dir is not on PATH."""
    venv_bin = os.path.dirname(sys.executable)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != os.path.abspath(venv_bin)]
    return {**os.environ, "PATH": os.pathsep.join(path or ["/usr/bin", "/bin"])}


def printed_command(output: str, marker: str) -> str:
    line = next(line for line in output.splitlines() if marker in line)
    return line.split(marker, 1)[1].strip().rstrip(")")


def signal_when(argv, condition, what: str, signum: int, meanwhile=None, **popen) -> subprocess.Popen:
    """Start ``argv``; once ``condition()`` holds, call ``meanwhile()`` and send ``signum``; the ended process
    (its output in ``.output``)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)
    try:
        wait_for(condition, 240, what)
        if meanwhile is not None:
            meanwhile()
        process.send_signal(signum)
        process.output = process.communicate(timeout=120)[0]
    finally:
        if process.poll() is None:
            process.kill()
    return process


def test_printed_commands_run_without_the_venv_and_the_continuation_keeps_jobs_and_the_lock(tmp_path):
    out = tmp_path / "exp"
    env = without_venv()
    argv = [sys.executable, "-m", "rlearn", *sweep_argv(out, "0-1")]

    def second_sweep() -> None:  # on the same dir: refused at once, in one line
        second = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        assert second.stderr.count("\n") == 1 and "is in use by another rlearn sweep" in second.stderr, second.stderr

    first = signal_when(argv, lambda: all((out / f"seed_{s}" / "console.log").is_file() for s in (0, 1)),
                        "both runs to start", signal.SIGTERM, second_sweep, cwd=tmp_path, env=env)
    output = first.output
    assert first.returncode == 143, output
    continuation = printed_command(output, "(or: ")
    assert continuation.endswith(f"sweep --out {out}") and not continuation.startswith("rlearn "), continuation
    done = subprocess.run(["bash", "-c", continuation], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 at a time" in done.stdout  # the --jobs the sweep was started with
    report = printed_command(done.stdout, "report: ")
    assert not report.startswith("rlearn ")
    pytest.importorskip("rliable")
    shown = subprocess.run(["bash", "-c", report + " --reps 20"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert (tmp_path / "report" / "report.md").is_file()


def test_a_config_error_in_a_run_ends_the_sweep_with_seeds_pending(tmp_path):
    out = tmp_path / "exp"
    done = subprocess.run([sys.executable, "-m", "rlearn", *sweep_argv(out, "0-3", "env.id=NoSuchEnv-v0", jobs=1)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "seed 0: failed with exit code 2" in done.stdout and "unknown environment id 'NoSuchEnv-v0'" in done.stdout
    assert "not starting further runs" in done.stdout
    state = json.loads((out / "sweep.json").read_text())
    assert [state["runs"][s]["status"] for s in "0123"] == ["failed", "pending", "pending", "pending"]


def test_seed_ranges_are_parsed_in_linear_time_and_capped():
    assert parse_seeds("0-9998,5,9999,3") == list(range(MAX_SEEDS))
    with pytest.raises(ExperimentError, match=rf"--seeds '0-1000000': 1000001 seeds; a sweep runs at most {MAX_SEEDS}"):
        parse_seeds("0-1000000")
    with pytest.raises(ExperimentError, match="at most"):
        parse_seeds("0-99999999999999999999")
    with pytest.raises(ExperimentError, match="at most"):
        parse_seeds(",".join(f"{i}-{i + 5000}" for i in range(0, 40000, 5001)))


def test_a_huge_seed_range_is_one_line_at_once(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rlearn", "sweep", "ppo_cartpole", "--seeds", "0-1000000", "--out",
                           str(tmp_path / "exp")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "a sweep runs at most" in done.stderr


@pytest.fixture
def continued(tmp_path, capsys):
    """``rlearn sweep --out DIR`` run in this process on a sweep dir whose ``sweep.json`` the test writes."""
    out = tmp_path / "exp"
    Sweep("ppo_cartpole", [0], out).close()  # a sweep dir, nothing run yet

    def run(manifest_text: str):
        (out / "sweep.json").write_text(manifest_text)
        code = main(["sweep", "--out", str(out), "--no-progress"])
        return code, capsys.readouterr()

    return out, run


@pytest.mark.parametrize("text, culprit", [
    ('{"seeds": "abc", "runs": {}}', "'seeds' must be a list of seeds"),
    ("[]", "not a JSON object"),
    ('{"seeds": [0], "runs": []}', "'runs' must be an object"),
    ('{"seeds": [0], "runs": {"0": "done"}}', "run '0' must be an object"),
    ('{"seeds": [0], "runs": {"0": {"status": 5}}}', "run '0': 'status'"),
    ('{"seeds": [0, "x"], "runs": {}}', "'seeds' must be a list of seeds"),
    ('{"seeds": [0], "runs": {}, "jobs": "two"}', "'jobs'"),
    ('{"seeds": [0], "ru', "cannot be read"),
])
def test_a_damaged_or_wrong_shaped_sweep_json_is_one_line(continued, text, culprit):
    out, run = continued
    code, captured = run(text)
    assert code == 2
    assert captured.err.count("\n") == 1 and captured.err.startswith("rlearn sweep: error: "), captured.err
    assert str(out / "sweep.json") in captured.err and culprit in captured.err, captured.err


def test_an_out_below_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code = main(["sweep", "ppo_cartpole", "--seeds", "0", "--out", str(tmp_path / "file" / "exp"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is a file" in err and str(tmp_path / "file") in err, err


def test_a_full_disk_when_a_sweep_starts_or_continues_is_one_line(tmp_path, capsys, monkeypatch):
    import rlearn.fileio

    real = rlearn.fileio.atomic_write_bytes

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "exp"
    with monkeypatch.context() as patch:  # starting: the sweep's config.py cannot be written
        patch.setattr("pathlib.Path.write_text", lambda *a, **k: full())
        code = main(["sweep", "ppo_cartpole", "--seeds", "0", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err and str(out) in err, err
    out = tmp_path / "exp2"
    Sweep("ppo_cartpole", [0], out).close()
    before = (out / "sweep.json").read_text()
    monkeypatch.setattr(rlearn.fileio, "atomic_write_bytes", full)  # continuing: sweep.json cannot be saved
    code = main(["sweep", "--out", str(out), "--seeds", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err and "sweep.json" in err, err
    monkeypatch.setattr(rlearn.fileio, "atomic_write_bytes", real)
    assert (out / "sweep.json").read_text() == before


def assert_each_point_once(work_dir: Path, last_iter: int) -> None:
    """Every log row, evaluation and TensorBoard point of a run exactly once, in order, up to the end."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows = [json.loads(line) for line in (work_dir / "metrics.jsonl").read_text().splitlines()]
    logs = [r["train_iter"] for r in rows if "policy_loss_avg" in r]
    assert logs == sorted(set(logs)) and logs[-1] == last_iter, logs
    evals = [json.loads(line)["envstep"] for line in (work_dir / "evaluations.jsonl").read_text().splitlines()]
    assert evals == sorted(set(evals)) and evals[-1] >= 256 * last_iter, evals
    acc = EventAccumulator(str(work_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    for tag in ("learner_iter/policy_loss_avg", "evaluator_step/episode_return_mean"):
        steps = [e.step for e in acc.Scalars(tag)]
        assert steps == sorted(set(steps)), (tag, steps)


@pytest.mark.slow  # three sweeps (about 40 s on 2 busy cores); the default suite's SIGTERM test resumes a sweep too
def test_sigint_then_sigkill_of_a_sweep_resume_without_duplicates(tmp_path):
    """Ctrl-C (SIGINT) while the runs train: exit 130, each run saves and stops. Continued, then killed
    outright (SIGKILL): the kernel sends the runs SIGTERM and they stop. Continued again: every run finishes
    with each point once."""
    out = tmp_path / "exp"
    argv = [sys.executable, "-m", "rlearn", *sweep_argv(out, "0-1", "train.max_env_steps=4096")]

    def rows(seed: int) -> int:
        path = out / f"seed_{seed}" / "metrics.jsonl"
        return len(path.read_text().splitlines()) if path.is_file() else 0

    first = signal_when(argv, lambda: rows(0) >= 2 or rows(1) >= 2, "a run to train", signal.SIGINT)
    assert first.returncode == 130, first.output
    assert "stopped at envstep" in first.output
    before = {s: rows(s) for s in (0, 1)}
    # SIGKILL: no handler runs in the sweep
    signal_when(argv, lambda: any(rows(s) > before[s] + 1 for s in (0, 1)), "a resumed run to train", signal.SIGKILL)
    third = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stdout + third.stderr
    state = json.loads((out / "sweep.json").read_text())
    assert {s: r["status"] for s, r in state["runs"].items()} == {"0": "finished", "1": "finished"}
    for seed in (0, 1):
        assert_each_point_once(out / f"seed_{seed}", 16)


def test_a_sweep_without_seeds_creates_nothing(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(["sweep", "ppo_cartpole", "--out", str(out), "--no-progress"]) == 2
    assert "--seeds is required to start a sweep" in capsys.readouterr().err
    assert not out.exists()  # so the same command with --seeds starts it
