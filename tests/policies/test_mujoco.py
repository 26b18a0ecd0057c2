"""MuJoCo beyond classic control: TD3 and SAC on HalfCheetah-v5 through `rlearn train`, rewards rising.

Needs the ``mujoco`` extra (``pip install -e '.[mujoco]'``); skipped cleanly without it. Slow: 8,000 env steps
for SAC and 15,000 for TD3 (whose returns start to rise later; 8,000 was not enough on every run), 1,000 of
them random, then one gradient step per env step, with [64, 64] networks: a few minutes each.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("mujoco", reason="MuJoCo is not installed (pip install -e '.[mujoco]')")


def episode_returns(metrics_file) -> list:
    """The training episodes' returns, one per log row: with ``log_freq = 1000`` (the window) and 1000-step
    episodes, every row's ``collector/episode_return_avg`` averages exactly the one episode that ended in it."""
    rows = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    return [row["collector/episode_return_avg"] for row in rows
            if "collector/episode_return_avg" in row and row["train_iter"] % 1000 == 0]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a few minutes on an idle machine, 5+ on a loaded shared one
@pytest.mark.parametrize("config, steps", [("td3_pendulum", 15_000), ("sac_pendulum", 8_000)])
def test_halfcheetah_training_return_rises(tmp_path, config, steps):
    work = tmp_path / "run"
    cmd = [sys.executable, "-m", "rlearn", "train", config, "--work-dir", str(work), "--no-progress", "--set",
           "env.id=HalfCheetah-v5", "exp_name=halfcheetah", "seed=0", f"train.max_env_steps={steps}",
           "policy.learning_starts=1000", "policy.hidden_sizes=[64,64]", "policy.gamma=0.99",
           "policy.learn_threads=1", "policy.adaptive_threads=false", "buffer.size=10000",
           "learner.log_freq=1000", "eval.freq=none", "eval.episodes=1", "checkpoint.freq=none"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    returns = episode_returns(work / "metrics.jsonl")
    assert len(returns) == steps // 1000 - 1, returns  # episodes ending at env steps 1000 (random), 2000, ...
    first, late = returns[0], sum(returns[-2:]) / 2
    assert late > first + 30, (config, returns)
