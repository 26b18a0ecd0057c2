"""``rlearn sweep --launcher slurm`` against a real one-node Slurm started on localhost: a job array of
runs completes, a task requeued in the middle of its run resumes without a lost or duplicated point, and a
cancelled array is resumed by ``rlearn sweep --out DIR``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("submitit")

pytestmark = pytest.mark.slurm

TINY = ["train.max_env_steps=1024", "eval.freq=512", "eval.episodes=1"]
#: long enough to be requeued in the middle: 16 PPO iterations, a checkpoint at every evaluation
LONGER = ["train.max_env_steps=4096", "eval.freq=512", "eval.episodes=1", "checkpoint.freq=512"]
#: keys whose values are clock readings, different in every run
CLOCK = ("time",)


def sweep(slurm, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlearn", "sweep", *args], capture_output=True, text=True,
                          timeout=timeout, env=slurm.env)


def job_ids(out: Path) -> dict:
    return {int(seed): run.get("job_id") for seed, run in json.loads((out / "sweep.json").read_text())["runs"].items()}


def wait_for(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def rows(path: Path) -> list:
    """A JSON-lines file's rows without clock readings (wall time, throughput, timings)."""
    kept = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        kept.append({k: v for k, v in row.items()
                     if k not in CLOCK and not k.startswith(("throughput/", "time/")) and not k.endswith("time_avg")})
    return kept


def scalars(work_dir: Path) -> dict:
    """Every TensorBoard scalar of a run, read with TensorBoard's own reader: tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(work_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]
            if "time" not in tag and "throughput" not in tag}


def test_a_job_array_of_four_runs_completes(slurm, tmp_path):
    out = tmp_path / "exp"
    done = sweep(slurm, "ppo_cartpole", "--seeds", "0-3", "--out", str(out), "--launcher", "slurm",
                 "--slurm", "time=10", "cpus_per_task=1", "--wait", "--set", *TINY)
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = job_ids(out)
    array = jobs[0].split("_")[0]
    assert jobs == {seed: f"{array}_{seed}" for seed in range(4)}  # one array, task i = seed i
    assert f"submitted seeds 0, 1, 2, 3 as Slurm job array {array}" in done.stdout
    for seed in range(4):
        work_dir = out / f"seed_{seed}"
        assert [r["envstep"] for r in rows(work_dir / "evaluations.jsonl")] == [512, 1024]
        assert f"--seed {seed}" in (work_dir / "console.log").read_text()
        assert (out / "slurm" / "logs" / jobs[seed] / f"{jobs[seed]}_0_log.out").is_file()
        assert f"  seed {seed}: done" in done.stdout
    again = sweep(slurm, "--out", str(out))  # the status of a finished Slurm sweep: nothing submitted
    assert again.returncode == 0 and "nothing to submit" in again.stdout and "report:" in again.stdout
    assert job_ids(out) == jobs


def test_a_task_requeued_mid_run_resumes_without_lost_or_duplicated_points(slurm, tmp_path):
    """``scontrol requeue`` of a running task: the run saves a checkpoint and stops, the task runs again and
    resumes it. Its points are those of an uninterrupted run of the same seed (trained beside it), each
    once; values match up to the checkpoint (after it the environments restart their episodes)."""
    out, reference = tmp_path / "exp", tmp_path / "reference"
    done = sweep(slurm, "ppo_cartpole", "--seeds", "0", "--out", str(out), "--launcher", "slurm", "--slurm", "time=10",
                 "--set", *LONGER)
    assert done.returncode == 0, done.stdout + done.stderr
    plain = subprocess.Popen([sys.executable, "-m", "rlearn", "train", str(out / "config.py"), "--seed", "0",
                              "--work-dir", str(reference), "--no-progress"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.STDOUT)
    job = job_ids(out)[0]
    work_dir = out / "seed_0"
    wait_for(lambda: (work_dir / "evaluations.jsonl").is_file(), 240, "the task never evaluated")
    slurm.command("scontrol", "requeue", job)

    def pending() -> bool:
        state = slurm.command("squeue", "-h", "-j", job, "-o", "%T", check=False).stdout.strip()
        return state == "PENDING"

    wait_for(pending, 120, "the task was not requeued")
    slurm.command("scontrol", "update", f"JobId={job}", "StartTime=now")  # Slurm delays a requeued job by 2 min
    follow = sweep(slurm, "--out", str(out), "--wait")
    assert follow.returncode == 0, follow.stdout + follow.stderr
    assert plain.wait(timeout=300) == 0
    console = (work_dir / "console.log").read_text()
    commands = [line for line in console.splitlines() if line.startswith("$ ")]
    assert len(commands) == 2 and commands[1].endswith(" --resume"), commands
    status = json.loads((out / "slurm" / "seed_0.json").read_text())
    assert status["status"] == "finished" and status["attempts"] == 2
    resumed_at = int(console.split("resumed from", 1)[1].split("train_iter=", 1)[1].split()[0])

    ours, theirs = rows(work_dir / "evaluations.jsonl"), rows(reference / "evaluations.jsonl")
    assert [(r["train_iter"], r["envstep"]) for r in ours] == [(r["train_iter"], r["envstep"]) for r in theirs]
    assert [r for r in ours if r["train_iter"] <= resumed_at] == [r for r in theirs if r["train_iter"] <= resumed_at]
    ours, theirs = rows(work_dir / "metrics.jsonl"), rows(reference / "metrics.jsonl")
    steps = [(r["train_iter"], tuple(sorted(r))) for r in ours]
    assert len(steps) == len(set(steps))  # none written twice
    assert {(r["train_iter"], r["envstep"]) for r in theirs} <= {(r["train_iter"], r["envstep"]) for r in ours}
    extra = {(r["train_iter"], r["envstep"]) for r in ours} - {(r["train_iter"], r["envstep"]) for r in theirs}
    per_iter = theirs[0]["envstep"] // theirs[0]["train_iter"]
    assert extra <= {(resumed_at, resumed_at * per_iter)}  # at most the row written when it stopped
    ours_tb, theirs_tb = scalars(work_dir), scalars(reference)
    assert set(ours_tb) == set(theirs_tb)
    counts = {}
    for tag, points in theirs_tb.items():
        mine = [step for step, _ in ours_tb[tag]]
        assert mine == sorted(set(mine)), tag  # none duplicated
        assert set(step for step, _ in points) <= set(mine), tag  # none lost
        limit = resumed_at * per_iter if tag.startswith("learner_step/") else resumed_at
        assert [p for p in ours_tb[tag] if p[0] < limit] == [p for p in points if p[0] < limit], tag
        counts[tag] = (len(mine), len(points))
    print("requeue point counts (requeued, uninterrupted):", json.dumps(counts))


def test_a_cancelled_array_resumes_with_sweep_out(slurm, tmp_path):
    """``scancel`` of the array while its runs train: ``rlearn sweep --out DIR`` shows them stopped, submits
    them again and they resume from their checkpoints to the end, each evaluation once."""
    out = tmp_path / "exp"
    done = sweep(slurm, "ppo_cartpole", "--seeds", "0,1", "--out", str(out), "--launcher", "slurm",
                 "--slurm", "time=10", "--set", *LONGER)
    assert done.returncode == 0, done.stdout + done.stderr
    array = job_ids(out)[0].split("_")[0]
    wait_for(lambda: all((out / f"seed_{s}" / "ckpt" / "latest.pt").is_file() for s in (0, 1)), 240, "no checkpoints")
    slurm.command("scancel", array)
    wait_for(lambda: not slurm.command("squeue", "-h", "-j", array, check=False).stdout.strip(), 120, "not cancelled")
    status = sweep(slurm, "--out", str(out), "--dry-run")
    assert status.returncode == 0, status.stderr
    assert "seed 0: stopped" in status.stdout and "seed 1: stopped" in status.stdout
    assert "would submit seeds 0, 1" in status.stdout and "#SBATCH --array=0-1%2" in status.stdout
    follow = sweep(slurm, "--out", str(out), "--wait")
    assert follow.returncode == 0, follow.stdout + follow.stderr
    assert job_ids(out)[0].split("_")[0] != array  # submitted again, as a new array
    for seed in (0, 1):
        work_dir = out / f"seed_{seed}"
        assert "resuming" in (work_dir / "console.log").read_text() or "--resume" in (work_dir / "console.log").read_text()
        steps = [r["envstep"] for r in rows(work_dir / "evaluations.jsonl")]
        assert steps == [512 * k for k in range(1, 9)]
