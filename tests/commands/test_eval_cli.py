"""``rlearn eval`` as a user runs it: a subprocess on the checkpoints of a tiny training run.

The run trains ``examples/custom_policy.py``, whose config defines its own policy: the checkpoint's config
lists that file in ``custom_imports``, so evaluating it needs ``--allow-imports``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlearn.hooks.eval import read_evaluations
from rlearn.hooks.log_show import format_value

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")
# 2 envs x 16 steps = 32 env steps per iteration; one evaluation, at the end (the evaluator's first, k = 0)
TINY = [
    "env.num_envs=2", "policy.rollout_steps=16", "policy.hidden=8", "policy.baseline_every=3",
    "learner.log_freq=4", "eval.freq=none", "eval.episodes=3", "eval.num_envs=2", "eval.stop_value=none",
    "checkpoint.freq=2", "train.max_env_steps=128",
]


def rlearn(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLEARN_NO_PROGRESS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "rlearn", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=timeout)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("eval_cli") / "run"
    out = rlearn("train", EXAMPLE, "--work-dir", str(work), "--set", *TINY)
    assert out.returncode == 0, out.stderr
    return work


def stats_lines(returns, lengths) -> list:
    r = np.asarray(returns, dtype=np.float64)
    return [
        f"  episode_return: mean {format_value(float(r.mean()))}  std {format_value(float(r.std()))}  min "
        f"{format_value(float(r.min()))}  max {format_value(float(r.max()))}",
        f"  episode_length: mean {format_value(float(np.mean(lengths)))}",
    ]


def test_a_work_dir_means_its_best_checkpoint_and_replays_the_runs_evaluation(run_dir):
    out = rlearn("eval", str(run_dir), "--allow-imports")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"checkpoint: {run_dir / 'ckpt' / 'best.pt'} (the best evaluation)"
    (row,) = read_evaluations(run_dir / "evaluations.jsonl")
    mean = float(np.mean(row["returns"]))
    assert lines[1] == f"  best evaluation of the run: return {format_value(mean)} at envstep 128"
    assert lines[2] == "policy: ReinforcePolicy on CartPole-v1, trained for train_iter 4, envstep 128"
    assert re.fullmatch(r"3 episodes, deterministic policy, seed \d+:", lines[3])
    # the same seed and the same policy as the run's (only) evaluation: the same episodes
    assert lines[4:6] == stats_lines(row["returns"], row["lengths"])
    assert out.stderr == ""


def test_without_best_pt_it_takes_latest_and_says_so(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    (copy / "ckpt" / "best.pt").unlink()
    out = rlearn("eval", str(copy), "--episodes", "2", "--allow-imports")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == f"checkpoint: {copy / 'ckpt' / 'latest.pt'} (the latest checkpoint; no best.pt)"
    assert "\n2 episodes, deterministic policy" in out.stdout


def test_episodes_seed_and_video(run_dir, tmp_path):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("pygame")
    video = tmp_path / "out" / "cartpole.mp4"
    args = ("eval", str(run_dir / "ckpt" / "iteration_2.pt"), "--episodes", "4", "--seed", "11", "--allow-imports")
    out = rlearn(*args, "--video", str(video))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"checkpoint: {run_dir / 'ckpt' / 'iteration_2.pt'} (as given)"
    assert "policy: ReinforcePolicy on CartPole-v1, trained for train_iter 2, envstep 64" in lines
    assert "4 episodes, deterministic policy, seed 11:" in lines
    match = re.fullmatch(r"video: (\S+) \((\d+) frames of 600x400; episode return \S+, (\d+) steps\)", lines[-1])
    assert match and Path(match.group(1)) == video and int(match.group(2)) == int(match.group(3)) + 1
    reader = imageio.get_reader(video)
    try:
        assert reader.count_frames() == int(match.group(2))
        assert reader.get_data(0).shape == (400, 600, 3)
    finally:
        reader.close()
    again = rlearn(*args)  # deterministic: the same numbers without the video
    assert again.returncode == 0 and again.stdout.splitlines()[-2:] == lines[-3:-1]


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing", "{p}: no such file or directory"),
    (lambda d: d, "{p}: no checkpoint in it (looked for ckpt/best.pt and ckpt/latest.pt)"),
    (lambda d: _write(d / "empty.pt", b""),
     "checkpoint {p}: not a PyTorch checkpoint (the file does not start with a zip header; it is empty)"),
    (lambda d: _write(d / "torn.pt", b"PK\x03\x04" + b"\0" * 64),
     "checkpoint {p}: truncated or corrupt (the zip archive has no central directory; was the save interrupted?)"),
])
def test_a_missing_or_corrupt_checkpoint_exits_2_with_one_line(tmp_path, make, message, capsys):
    """In this process (the subprocess path is covered by the torn copy below): the same ``main``."""
    from rlearn.cli import main

    path = make(tmp_path)
    assert main(["eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"rlearn eval: error: {message.format(p=path)}\n"


def test_a_torn_copy_of_a_real_checkpoint_exits_2(run_dir, tmp_path):
    torn = _write(tmp_path / "latest.pt", (run_dir / "ckpt" / "latest.pt").read_bytes()[:2000])
    out = rlearn("eval", str(torn))
    assert out.returncode == 2 and out.stderr.startswith(f"rlearn eval: error: checkpoint {torn}: truncated or corrupt")
    assert len(out.stderr.splitlines()) == 1


def test_imports_named_in_the_checkpoint_run_only_with_allow_imports(run_dir, tmp_path):
    """Opening a checkpoint runs no code from it: the file its config names is not imported (nor any of
    them) unless --allow-imports says the checkpoint is trusted."""
    from rlearn.checkpoint import read_checkpoint, serialize_checkpoint

    marker = tmp_path / "imported"
    planted = tmp_path / "planted.py"
    planted.write_text(f"open({str(marker)!r}, 'w').close()\n")
    checkpoint = read_checkpoint(run_dir / "ckpt" / "latest.pt")
    checkpoint["config"]["custom_imports"] = [*checkpoint["config"]["custom_imports"], str(planted)]
    path = _write(tmp_path / "planted.pt", serialize_checkpoint(checkpoint))

    out = rlearn("eval", str(path), "--episodes", "1")
    assert out.returncode == 2 and not marker.exists()
    assert out.stderr == (f"rlearn eval: error: checkpoint {path}: its config imports code (custom_imports "
                          f"{EXAMPLE!r}; custom_imports {str(planted)!r}), and opening a checkpoint runs no code from "
                          "it by default; if you trust this checkpoint and those files, pass --allow-imports\n")
    out = rlearn("eval", str(path), "--episodes", "1", "--allow-imports")
    assert out.returncode == 0, out.stderr
    assert marker.exists()


def test_a_config_naming_code_by_import_path_needs_allow_imports_too():
    from rlearn.config import imports_named

    assert imports_named({"policy": {"type": "td3"}, "env": {"id": "Pendulum-v1"}, "custom_imports": []}) == []
    assert imports_named({"policy": {"type": "my_pkg.agents:MyPolicy"}, "env": {"id": "my_pkg.envs:Maze-v0"},
                          "custom_imports": ["my_pkg.extra"]}) == [
        "custom_imports 'my_pkg.extra'", "policy.type 'my_pkg.agents:MyPolicy'", "env.id 'my_pkg.envs:Maze-v0'"]


def test_eval_reads_the_networks_only_and_plays_despite_an_optimizer_state_that_does_not_fit(run_dir, tmp_path):
    from rlearn.checkpoint import read_checkpoint, serialize_checkpoint

    checkpoint = read_checkpoint(run_dir / "ckpt" / "latest.pt")
    (name, optimizer), *_ = sorted(checkpoint["policy"]["optimizers"].items())
    optimizer["param_groups"][0]["lr"] = "fast"  # --resume refuses it; playing does not need it
    path = _write(tmp_path / "bad_lr.pt", serialize_checkpoint(checkpoint))
    out = rlearn("eval", str(path), "--allow-imports")
    assert out.returncode == 0, out.stderr
    assert "episode_return: mean" in out.stdout


def test_bad_arguments_exit_2(capsys):
    from rlearn.cli import main

    with pytest.raises(SystemExit) as info:
        main(["eval", "x", "--episodes", "0"])
    assert info.value.code == 2 and "--episodes: must be >= 1, got 0" in capsys.readouterr().err


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
