"""The ``rlearn`` command as a user runs it: a subprocess, exit codes, files on disk, Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn import __version__
from rlearn.checkpoint import read_checkpoint

from rlearn.writers.table import parse_log_tables

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")
TINY = [
    "env.num_envs=2", "policy.rollout_steps=16", "policy.hidden=8", "policy.baseline_every=3",
    "learner.log_freq=4", "eval.freq=192", "eval.episodes=2", "eval.num_envs=2", "eval.stop_value=none",
    "checkpoint.freq=8",
]


def env() -> dict:
    return {**os.environ, "RLEARN_NO_PROGRESS": "1", "PYTHONUNBUFFERED": "1"}


def rlearn(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlearn", *args], capture_output=True, text=True, cwd=cwd,
                          env=env(), timeout=timeout)


def tags_and_steps(tb_dir: Path) -> dict:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# ------------------------------------------------------------------------------------------ basics
def test_help_and_version():
    out = rlearn("--help")
    assert out.returncode == 0
    assert "train" in out.stdout and "trace" in out.stdout
    out = rlearn("--version")
    assert (out.returncode, out.stdout.strip()) == (0, f"rlearn {__version__}")
    script = Path(sys.executable).parent / "rlearn"
    if script.exists():  # the console script installed by pip
        out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
        assert out.stdout.strip() == f"rlearn {__version__}"
    out = rlearn("train", "--help")
    assert out.returncode == 0
    for option in ("--work-dir", "--seed", "--set", "--resume", "--list-configs", "--print-config"):
        assert option in out.stdout


def test_list_configs():
    out = rlearn("train", "--list-configs")
    assert out.returncode == 0
    assert re.search(r"^td3_pendulum\s+TD3 on Pendulum-v1", out.stdout, re.M)


def test_print_config_applies_overrides():
    out = rlearn("train", EXAMPLE, "--print-config", "--seed", "5", "--set", "train.max_env_steps=1e4", "policy.lr=0.01")
    assert out.returncode == 0, out.stderr
    assert "'seed': 5," in out.stdout and "'max_env_steps': 10000," in out.stdout and "'lr': 0.01," in out.stdout


@pytest.mark.parametrize("args, message", [
    (["train", "td3_pendulum", "--set", "train.max_env_step=5"],
     "rlearn train: error: unknown config key 'train.max_env_step'; did you mean 'train.max_env_steps'? "
     "(keys at 'train': collect_steps, max_env_steps, updates_per_step)"),
    (["train", "td3_pendulum", "--set", "train.max_env_steps=fast"],
     "rlearn train: error: --set train.max_env_steps=fast: cannot read 'fast' as int"),
    (["train", "td3_pendulum", "--set", "eval.episodes=0"],
     "rlearn train: error: config key 'eval.episodes' must be >= 1, got 0"),
    (["train", "missing_config.py"], "rlearn train: error: config file 'missing_config.py' does not exist"),
    (["train"], "rlearn train: error: CONFIG is required: a config file (e.g. examples/custom_policy.py) or a bundled "
                "config name (see: rlearn train --list-configs)"),
])
def test_mistakes_exit_2_with_one_line(args, message):
    out = rlearn(*args)
    assert out.returncode == 2
    assert out.stderr == message + "\n"
    assert "Traceback" not in out.stdout


# ------------------------------------------------------------------------------- train and resume
def test_train_then_resume(tmp_path):
    work = tmp_path / "run"
    out = rlearn("train", EXAMPLE, "--work-dir", str(work), "--set", "train.max_env_steps=384", *TINY)
    assert out.returncode == 0, out.stderr
    # 2 envs x 16 steps = 32 env steps per iteration -> 12 iterations
    log = (work / "reinforce_cartpole.log").read_text()
    table = [t for t in parse_log_tables(log) if t["train_iter"] == "4"]  # the heading, then the table's blocks
    assert len(table) == 1 and table[0]["envstep"] == "128" and "policy_loss_avg" in table[0]
    assert "policy_loss_avg" in log and "baseline_loss_avg" in log
    assert f"tensorboard --logdir {work / 'tb'}" in out.stdout
    tb = tags_and_steps(work / "tb")
    assert tb["learner_iter/policy_loss_avg"] == [4, 8, 12]
    assert tb["learner_iter/baseline_loss_avg"] == [4, 8, 12]  # reported every 3rd iteration, window 4
    assert tb["learner_step/policy_loss_avg"] == [128, 256, 384]
    assert tb["evaluator_step/episode_return_mean"] == [192, 384]
    assert (work / "config.py").is_file()
    assert read_checkpoint(work / "ckpt" / "latest.pt")["train_iter"] == 12

    # resume from the dumped config (which loads the custom policy by itself) with a bigger budget
    out = rlearn("train", str(work / "config.py"), "--work-dir", str(work), "--resume",
                 "--set", "train.max_env_steps=640", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "resumed from" in out.stdout and "train_iter=12 envstep=384" in out.stdout
    saved = read_checkpoint(work / "ckpt" / "latest.pt")
    assert (saved["train_iter"], saved["envstep"]) == (20, 640)
    tb = tags_and_steps(work / "tb")
    assert tb["learner_iter/policy_loss_avg"] == [4, 8, 12, 16, 20]
    assert tb["learner_iter/baseline_loss_avg"] == [4, 8, 12, 16, 20]
    assert tb["evaluator_step/episode_return_mean"] == [192, 384, 576, 640]


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    work = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlearn", "train", EXAMPLE, "--work-dir", str(work), "--set",
         "train.max_env_steps=10000000", *TINY],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env(),
    )
    log = work / "reinforce_cartpole.log"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and "train_iter 4  envstep" in log.read_text():
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert "Traceback" not in stderr and "Traceback" not in stdout
    stopped = re.search(r"Ctrl-C: stopping at train_iter (\d+), envstep (\d+); saving a checkpoint", stdout)
    assert stopped, stdout
    saved = read_checkpoint(work / "ckpt" / "latest.pt")
    assert (saved["train_iter"], saved["envstep"]) == (int(stopped.group(1)), int(stopped.group(2)))
    # the venv's own rlearn when PATH does not find it (rlearn.executables)
    assert re.search(r"resume with: (\S*/)?rlearn train " + re.escape(f"{work / 'config.py'} --work-dir {work} --resume"),
                     stdout), stdout[-2000:]
