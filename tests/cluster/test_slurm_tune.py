"""``rlearn tune --launcher slurm --workers 2`` against a real one-node Slurm: two tuners in two Slurm tasks
share the study in the dir's journal file and end with exactly ``--trials`` trials."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

pytest.importorskip("submitit")
optuna = pytest.importorskip("optuna")

from tests.experiments.test_experiments_tune import load_study  # noqa: E402

pytestmark = pytest.mark.slurm


def test_two_slurm_workers_share_one_study(slurm, tmp_path):
    space = tmp_path / "space.py"
    space.write_text('def space(trial):\n    return {"policy.lr": trial.suggest_float("lr", 1e-4, 1e-2, log=True)}\n')
    out = tmp_path / "exp"
    done = subprocess.run([sys.executable, "-m", "rlearn", "tune", "ppo_cartpole", "--space", str(space), "--trials", "3",
                           "--out", str(out), "--launcher", "slurm", "--workers", "2", "--slurm", "time=10",
                           "--sampler-seed", "0", "--set", "train.max_env_steps=512", "eval.freq=512", "eval.episodes=1"],
                          capture_output=True, text=True, timeout=300, env=slurm.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted 2 tune worker(s) as Slurm job" in done.stdout
    deadline = time.monotonic() + 400
    while slurm.command("squeue", "-h", check=False).stdout.strip():
        assert time.monotonic() < deadline, "the workers did not end"
        time.sleep(1)
    trials = load_study(out).get_trials()
    assert sorted((t.number, t.state.name) for t in trials) == [(0, "COMPLETE"), (1, "COMPLETE"), (2, "COMPLETE")]
    tasks = {t.user_attrs["worker"]["slurm"] for t in trials}
    assert tasks <= {f"{job}_{i}" for job in {task.split("_")[0] for task in tasks} for i in (0, 1)} and len(tasks) == 2
    logs = sorted(p.name for p in (out / "slurm" / "logs").glob("*_*/*_0_log.out"))
    assert len(logs) == 2
