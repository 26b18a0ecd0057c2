"""``rlearn tune`` with several workers on one study, and its faults: one dir is one study, mistakes in
SPACE.py or the options are one line with exit code 2 and leave no trial RUNNING, a locked database is named
as such, a killed worker's trial is taken over, and the printed commands paste as they are."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")

from tests.experiments.test_experiments_tune import load_study  # noqa: E402

#: one PPO iteration of 512 env steps, one evaluation at its end: a trial takes a few seconds
TINY = ["train.max_env_steps=512", "eval.freq=512", "eval.episodes=1", "eval.num_envs=1"]

SPACE = '''
def space(trial):
    return {"policy.lr": trial.suggest_float("lr", 1e-4, 1e-2, log=True)}
'''


def command(out: Path, space: Path, trials: int, *extra: str, budget=TINY) -> list:
    return [sys.executable, "-m", "rlearn", "tune", "ppo_cartpole", "--space", str(space), "--trials", str(trials),
            "--out", str(out), "--no-progress", *extra, "--set", *budget]


def write_space(tmp_path: Path, text: str = SPACE) -> Path:
    path = tmp_path / "space.py"
    path.write_text(text)
    return path


def one_line_error(done: subprocess.CompletedProcess, *parts: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlearn tune: error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def run(cmd: list, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished two-trial study (reused by the tests that start from one)."""
    root = tmp_path_factory.mktemp("tune_workers")
    space = write_space(root)
    done = run(command(root / "exp", space, 2, "--sampler-seed", "0"))
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "exp", space, done


def test_two_tuners_started_at_once_share_one_study(tmp_path):
    """Two processes on one --out, started together: exactly --trials trials, each run once, both exit 0."""
    space = write_space(tmp_path)
    cmd = command(tmp_path / "exp", space, 3)
    both = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in both]
    for process, (out, err) in zip(both, outputs):
        assert process.returncode == 0, out + err
        assert "Traceback" not in out + err and "error" not in err
    trials = load_study(tmp_path / "exp").get_trials()
    assert sorted((t.number, t.state.name) for t in trials) == [(0, "COMPLETE"), (1, "COMPLETE"), (2, "COMPLETE")]
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2  # both worked
    assert sorted(p.name for p in (tmp_path / "exp").glob("trial_*")) == ["trial_0", "trial_1", "trial_2"]


def test_a_worker_killed_mid_trial_leaves_no_trial_running(tmp_path):
    """SIGKILL of the tuner while its trial trains: started again, the trial is taken over at once (its
    worker's process is gone) and resumed in its work dir; nothing stays RUNNING."""
    space = write_space(tmp_path)
    budget = ["train.max_env_steps=2560", "eval.freq=512", "eval.episodes=1", "eval.num_envs=1",
              "checkpoint.freq=512"]
    cmd = command(tmp_path / "exp", space, 1, budget=budget)
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not (tmp_path / "exp" / "trial_0" / "evaluations.jsonl").is_file():
        assert time.monotonic() < deadline and first.poll() is None, "no evaluation"
        time.sleep(0.2)
    first.kill()
    first.communicate(timeout=60)
    assert [t.state.name for t in load_study(tmp_path / "exp").get_trials()] == ["RUNNING"]
    second = run(cmd, timeout=400)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "trial 0: its worker is gone; queued again" in second.stdout
    trials = load_study(tmp_path / "exp").get_trials()
    assert [(t.number, t.state.name) for t in trials] == [(0, "FAIL"), (1, "COMPLETE")], second.stdout
    assert Path(trials[1].user_attrs["work_dir"]).name == "trial_0"
    assert not (tmp_path / "exp" / "trial_1").exists()


@pytest.mark.slow
def test_a_live_worker_s_trials_are_never_taken_over(tmp_path):
    """A second tuner that finds the study full waits for the first one's running trial instead of adopting
    it, and both end with one complete trial."""
    space = write_space(tmp_path)
    budget = ["train.max_env_steps=2048", "eval.freq=512", "eval.episodes=1", "eval.num_envs=1"]
    cmd = command(tmp_path / "exp", space, 1, "--heartbeat", "1", budget=budget)
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not (tmp_path / "exp" / "trial_0" / "metrics.jsonl").is_file():
        assert first.poll() is None, first.communicate()[0]
        time.sleep(0.2)
    second = run(cmd)
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, out + second.stdout + second.stderr
    assert "queued again" not in second.stdout
    assert [(t.number, t.state.name) for t in load_study(tmp_path / "exp").get_trials()] == [(0, "COMPLETE")]


def test_another_study_name_on_an_existing_out_is_refused(finished):
    out, space, _ = finished
    before = (out / "best_config.py").read_text()
    done = run(command(out, space, 4, "--study-name", "other"))
    one_line_error(done, "study 'ppo_cartpole'", "'other' needs its own --out")
    assert (out / "best_config.py").read_text() == before


def test_an_emptied_study_file_is_refused(finished, tmp_path):
    """A 0-byte study file would make a new study whose trial 0 is the old trial_0's run: refused."""
    out, space, _ = finished
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "study.journal").write_bytes(b"")
    done = run(command(copy, space, 3))
    one_line_error(done, "emptied, replaced or recreated", "choose another --out")
    assert sorted(p.name for p in copy.glob("trial_*")) == ["trial_0", "trial_1"]


@pytest.mark.slow
def test_a_copied_dir_continues_its_own_study(finished, tmp_path):
    """The storage is kept relative to the dir: a copy never writes into the original's study."""
    out, space, _ = finished
    original = (out / "study.journal").read_bytes()
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    done = run(command(copy, space, 3, "--sampler-seed", "0"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "study.journal").read_bytes() == original
    assert [t.state.name for t in load_study(copy).get_trials()] == ["COMPLETE"] * 3
    assert (copy / "trial_2").is_dir() and not (out / "trial_2").exists()


def test_a_legacy_copy_with_an_absolute_sqlite_url_uses_its_own_database(finished, tmp_path):
    """Older dirs wrote ``sqlite:////abs/dir/study.db`` into tune.json: a copy switches to its own file."""
    import json

    from rlearn.experiments.tune import Tuner

    out, space, _ = finished
    original = tmp_path / "original"
    Tuner("ppo_cartpole", space, 1, original, storage=f"sqlite:///{original.resolve() / 'study.db'}",
          overrides=TINY)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    manifest = json.loads((copy / "tune.json").read_text())
    assert manifest["storage"] == f"sqlite:///{original.resolve() / 'study.db'}"
    tuner = Tuner("ppo_cartpole", space, 1, copy, overrides=TINY)
    assert tuner.storage_url == f"sqlite:///{copy.resolve() / 'study.db'}"
    assert tuner.notes == [f"{copy} is a copy of {original.resolve()}: it continues its own study in {copy / 'study.db'}"]


@pytest.mark.parametrize("text, culprit", [
    (SPACE.replace("return {", "raise ValueError('no space today')\n    return {"),
     "space(trial) raised ValueError: no space today"),
    (SPACE + "\ndef pruner():\n    return 'median'\n", "pruner() must return an optuna.pruners.BasePruner, got str"),
    (SPACE + "\ndef pruner():\n    raise RuntimeError('no pruner')\n", "pruner() raised RuntimeError: no pruner"),
    (SPACE + "\ndef sampler():\n    return 3\n", "sampler() must return an optuna.samplers.BaseSampler, got int"),
])
def test_a_broken_space_file_is_one_line_and_leaves_no_trial_running(tmp_path, text, culprit):
    space = write_space(tmp_path, text)
    done = run(command(tmp_path / "exp", space, 2, "--jobs", "2"))
    one_line_error(done, str(space), culprit)
    if (tmp_path / "exp" / "study.journal").is_file():
        states = [t.state.name for t in load_study(tmp_path / "exp").get_trials()]
        assert "RUNNING" not in states and "FAIL" in states


@pytest.mark.parametrize("option, value, text", [
    ("--startup-trials", "-1", "--startup-trials must be >= 0, got -1"),
    ("--sampler-seed", "-1", "--sampler-seed must be >= 0, got -1"),
    ("--warmup-steps", "-5", "--warmup-steps must be >= 0, got -5"),
    ("--heartbeat", "0", "--heartbeat must be > 0 seconds, got 0.0"),
])
def test_bad_numbers_are_one_line(tmp_path, option, value, text):
    done = run(command(tmp_path / "exp", write_space(tmp_path), 2, option, value))
    one_line_error(done, text)
    assert not (tmp_path / "exp").exists()


def test_a_locked_database_is_named_as_such(tmp_path, monkeypatch, capsys):
    """SQLite locked by another process for longer than the timeout: one line that says so (Optuna's own
    message speaks of invalid data exceeding a max length)."""
    from rlearn import cli
    from rlearn.experiments import study

    monkeypatch.setattr(study, "SQLITE_TIMEOUT_S", 1)
    space = write_space(tmp_path)
    db = tmp_path / "study.db"
    url = f"sqlite:///{db}"
    optuna.create_study(storage=url, study_name="ppo_cartpole")
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code = cli.main(command(tmp_path / "exp", space, 1, "--storage", url)[3:])
    finally:
        holder.rollback()
        holder.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"rlearn tune: error: --storage {url}: the study database {url} stayed locked by another "
                             "process for more than 1 s")
    assert "max length" not in err[0]


def test_the_default_warm_up_waits_for_learning_to_start(tmp_path):
    from rlearn.experiments.tune import Tuner

    space = write_space(tmp_path)
    dqn = Tuner("dqn_cartpole", space, 2, tmp_path / "dqn", overrides=["eval.freq=2500"])
    assert dqn.grid == 2500 and dqn.learning_starts == 1000
    assert dqn.study.pruner._n_warmup_steps == 3500
    ppo = Tuner("ppo_cartpole", space, 2, tmp_path / "ppo", overrides=["eval.freq=512"], warmup_steps=0)
    assert ppo.study.pruner._n_warmup_steps == 0


def test_printed_commands_paste_without_an_activated_venv(finished, tmp_path):
    """`train it:` and `report:` run from a shell whose PATH does not hold the venv; the dashboard line is a
    command only when optuna-dashboard is installed, else it names the extra that brings it."""
    out, _, done = finished
    lines = {line.split(":", 1)[0].strip(): line for line in done.stdout.splitlines()}
    train = lines["best config"].split("(train it: ", 1)[1].rstrip(")")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    check = run(["bash", "-c", train + " --help"], env=env, cwd=os.getcwd())
    assert check.returncode == 0 and "usage: rlearn train" in check.stdout, check.stderr
    report = lines["report"].split("report: ", 1)[1]
    assert shlex.split(report)[1:] == ["report", str(out)]
    assert run(["bash", "-c", report + " --help"], env=env).returncode == 0
    dashboard = lines["dashboard"]
    if shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)):
        assert shlex.split(dashboard.split("dashboard: ", 1)[1])[-1] == str(out / "study.journal")
    else:
        assert "'.[dashboard]'" in dashboard and "pip install" in dashboard


@pytest.mark.slow
def test_sigterm_stops_the_study_and_the_same_command_resumes_it(tmp_path):
    """SIGTERM: the trial saves a checkpoint, is queued again (nothing RUNNING), exit 143; the same command
    resumes it from its checkpoint without a duplicated evaluation."""
    import json

    space = write_space(tmp_path)
    budget = ["train.max_env_steps=3072", "eval.freq=512", "eval.episodes=1", "eval.num_envs=1"]
    cmd = command(tmp_path / "exp", space, 1, budget=budget)
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not (tmp_path / "exp" / "trial_0" / "evaluations.jsonl").is_file():
        assert first.poll() is None, first.communicate()[0]
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 143, out
    assert [t.state.name for t in load_study(tmp_path / "exp").get_trials()] == ["FAIL", "WAITING"]
    second = run(cmd)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "trial 1: trial 0 again" in second.stdout and "resuming" in second.stdout
    steps = [json.loads(line)["envstep"] for line in (tmp_path / "exp" / "trial_0" / "evaluations.jsonl").open()]
    assert steps == sorted(set(steps)) and len(steps) == 6
    trial = load_study(tmp_path / "exp").get_trials()[1]
    assert sorted(trial.intermediate_values) == [512 * k for k in range(1, 7)]


@pytest.mark.parametrize("storage", ["journal", "sqlite"])
def test_a_damaged_study_file_is_refused_in_one_line(tmp_path, storage):
    """Garbage in the study file (the journal, or an SQLite database given with --storage): one line naming
    it, exit 2, and the dir is left as it was."""
    space = write_space(tmp_path)
    out = tmp_path / "exp"
    extra = []
    if storage == "journal":
        from rlearn.experiments.tune import Tuner

        Tuner("ppo_cartpole", space, 1, out, overrides=TINY)  # a tuning dir with its study, to damage
        damaged = out / "study.journal"
    else:
        damaged = tmp_path / "study.db"
        extra = ["--storage", f"sqlite:///{damaged}"]
    damaged.write_bytes(b"this is not a study\n" * 20)
    before = sorted(p.name for p in out.iterdir()) if out.exists() else None
    done = run(command(out, space, 2, *extra))
    one_line_error(done, str(damaged) if storage == "journal" else f"--storage sqlite:///{damaged}")
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else None) == before


def test_abandoned_trials_are_told_by_their_worker_and_heartbeat():
    """A running trial is taken over only when its worker is gone: its process on this host ended, it is an
    earlier run of this Slurm task, or its heartbeat is older than the grace period; requeueing is atomic."""
    from rlearn.experiments.study import (
        HEARTBEAT_ATTR, WORKER_ATTR, is_abandoned, is_surplus, requeue, worker_identity,
    )

    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    storage = study._storage
    me = worker_identity()
    now = time.time()

    def frozen(worker, beat):
        storage.set_trial_user_attr(trial._trial_id, WORKER_ATTR, worker)
        storage.set_trial_user_attr(trial._trial_id, HEARTBEAT_ATTR, beat)
        return storage.get_trial(trial._trial_id)

    assert not is_abandoned(frozen(me, now - 1000), me, 60, now)  # my own trial, whatever its heartbeat
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = {**me, "pid": dead.pid, "start": "0"}
    assert is_abandoned(frozen(gone, now), me, 60, now)  # its process on this host has ended
    elsewhere = {**gone, "host": "another-host"}
    assert not is_abandoned(frozen(elsewhere, now - 59), me, 60, now)  # another host: alive while it beats
    assert is_abandoned(frozen(elsewhere, now - 61), me, 60, now)
    task = {**me, "slurm": "17_3"}
    assert is_abandoned(frozen({**elsewhere, "slurm": "17_3"}, now), task, 60, now)  # an earlier run of this task
    assert requeue(study, storage.get_trial(trial._trial_id)) is True
    assert requeue(study, storage.get_trial(trial._trial_id)) is False  # already taken: never twice
    states = [(t.number, t.state.name) for t in study.get_trials()]
    assert states == [(0, "FAIL"), (1, "WAITING")]
    copy = study.get_trials()[1]
    assert copy.system_attrs["failed_trial"] == 0 and WORKER_ATTR not in copy.user_attrs
    assert [study.ask().number for _ in range(3)] == [1, 2, 3]  # the queued copy first
    # trial 3 beside 1 and 2 (the failed 0 does not count): within 3 trials, beyond 2
    assert not is_surplus(study, 3, 3) and is_surplus(study, 3, 2)
