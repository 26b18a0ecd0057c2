"""One study in a real PostgreSQL (started on 127.0.0.1 by the fixture), shared by two ``rlearn tune``
workers in separate processes with separate experiment dirs, as on two machines."""

from __future__ import annotations

import subprocess
import sys

import pytest

optuna = pytest.importorskip("optuna")

pytestmark = pytest.mark.postgres

SPACE = '''
def space(trial):
    return {"policy.lr": trial.suggest_float("lr", 1e-4, 1e-2, log=True)}
'''
TINY = ["train.max_env_steps=512", "eval.freq=512", "eval.episodes=1", "eval.num_envs=1"]


def test_two_workers_share_one_study_through_postgresql(postgres, tmp_path):
    space = tmp_path / "space.py"
    space.write_text(SPACE)

    def worker(n: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "rlearn", "tune", "ppo_cartpole", "--space", str(space),
                                 "--trials", "4", "--out", str(tmp_path / f"machine_{n}"), "--storage", postgres.url,
                                 "--study-name", "shared", "--sampler-seed", str(n), "--no-progress", "--set", *TINY],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    workers = [worker(0), worker(1)]
    outputs = [w.communicate(timeout=400) for w in workers]
    for w, (out, err) in zip(workers, outputs):
        assert w.returncode == 0, out + err
        assert "Traceback" not in out + err
    study = optuna.load_study(study_name="shared", storage=postgres.url)
    trials = study.get_trials()
    assert sorted(t.state.name for t in trials) == ["COMPLETE"] * 4 and sorted(t.number for t in trials) == [0, 1, 2, 3]
    by_machine = {n: {t.number for t in trials if f"machine_{n}" in t.user_attrs["work_dir"]} for n in (0, 1)}
    assert by_machine[0] and by_machine[1] and not by_machine[0] & by_machine[1]  # both worked, no trial twice
    for n, numbers in by_machine.items():
        assert sorted(p.name for p in (tmp_path / f"machine_{n}").glob("trial_*")) == sorted(f"trial_{k}" for k in numbers)
    # the password-less URL is shown as it is; each machine's summary counts the whole study
    assert all("4 complete" in out for out, _ in outputs)
