"""The bundled MuJoCo configs: rl-baselines3-zoo's numbers, a tiny run of each, and the one-line message when
MuJoCo is not installed.

The zoo's values below are typed from its ``hyperparams/{td3,sac,ppo}.yml`` (the sources each config's
docstring cites), in rlearn's names; a config or a policy default that drifts from them fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlearn.config import load_config
from rlearn.configs import available_configs

REPO = Path(__file__).resolve().parents[2]
ENV_IDS = {"halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5", "walker2d": "Walker2d-v5"}

#: SB3's TD3 / SAC defaults as the zoo's ``&mujoco-defaults`` use them, with its ``learning_starts: 10000``
TD3_ZOO = dict(type="td3", hidden_sizes=[400, 300], lr_actor=1e-3, lr_critic=1e-3, batch_size=256, gamma=0.99,
               tau=0.005, learning_starts=10_000, actor_update_freq=2, exploration_noise=0.1, target_noise=0.2,
               target_noise_clip=0.5)
SAC_ZOO = dict(type="sac", hidden_sizes=[256, 256], lr_actor=3e-4, lr_critic=3e-4, lr_alpha=3e-4, batch_size=256,
               gamma=0.99, tau=0.005, learning_starts=10_000, autotune=True, init_alpha=1.0, target_entropy=None)
PPO_RELU_256 = dict(hidden_sizes=[256, 256], activation="relu", init_log_std=-2.0)
ZOO = {
    "td3_halfcheetah": TD3_ZOO,
    "td3_hopper": {**TD3_ZOO, "lr_actor": 3e-4, "lr_critic": 3e-4},  # Hopper-v3's "SAC Hyperparams"
    "td3_walker2d": TD3_ZOO,
    "sac_halfcheetah": SAC_ZOO,
    "sac_hopper": SAC_ZOO,
    "sac_walker2d": SAC_ZOO,
    "ppo_halfcheetah": dict(type="ppo", rollout_steps=512, minibatch_size=64, epochs=20, gamma=0.98, gae_lambda=0.92,
                            lr=2.0633e-05, clip_ratio=0.1, entropy_coef=0.000401762, value_coef=0.58096,
                            max_grad_norm=0.8, normalize_advantage=True, clip_value=None, **PPO_RELU_256),
    "ppo_hopper": dict(type="ppo", rollout_steps=512, minibatch_size=32, epochs=5, gamma=0.999, gae_lambda=0.99,
                       lr=9.80828e-05, clip_ratio=0.2, entropy_coef=0.00229519, value_coef=0.835671, max_grad_norm=0.7,
                       normalize_advantage=True, clip_value=None, **PPO_RELU_256),
    "ppo_walker2d": dict(type="ppo", rollout_steps=512, minibatch_size=32, epochs=20, gamma=0.99, gae_lambda=0.95,
                         lr=5.05041e-05, clip_ratio=0.1, entropy_coef=0.000585045, value_coef=0.871923,
                         max_grad_norm=1.0, normalize_advantage=True, clip_value=None, hidden_sizes=[64, 64],
                         activation="tanh", init_log_std=0.0),
}


def test_every_mujoco_config_is_bundled_and_listed():
    assert sorted(name for name in available_configs() if name.split("_", 1)[1] in ENV_IDS) == sorted(ZOO)
    listed = subprocess.run([sys.executable, "-m", "rlearn", "train", "--list-configs"], capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]
    assert set(ZOO) <= set(names)


@pytest.mark.parametrize("name", sorted(ZOO))
def test_mujoco_config_holds_the_zoo_settings(name):
    cfg = load_config(name)
    assert cfg["exp_name"] == name
    assert cfg["env"]["id"] == ENV_IDS[name.split("_", 1)[1]] and cfg["env"]["num_envs"] == 1
    assert cfg["train"]["max_env_steps"] == 1_000_000  # the zoo's n_timesteps: 1e6
    assert {key: cfg["policy"][key] for key in ZOO[name]} == ZOO[name]
    if cfg["policy"]["type"] != "ppo":
        assert cfg["buffer"]["size"] == 1_000_000
        assert cfg["train"]["updates_per_step"] == 1.0 and cfg["train"]["collect_steps"] == 1  # train_freq 1


# ------------------------------------------------------------------------------------ with MuJoCo
def tiny_overrides(name: str) -> list:
    """A few hundred env steps: 100 random then 100 gradient steps (off-policy), two 64-step updates (PPO)."""
    if name.startswith("ppo"):
        return ["train.max_env_steps=128", "policy.rollout_steps=64", "checkpoint.freq=none", "eval.episodes=1",
                "eval.num_envs=1", "learner.log_freq=1"]
    return ["train.max_env_steps=200", "policy.learning_starts=100", "buffer.size=1000", "checkpoint.freq=none",
            "eval.episodes=1", "eval.num_envs=1", "learner.log_freq=50", "policy.learn_threads=none"]


@pytest.mark.parametrize("name", [name if "halfcheetah" in name else pytest.param(name, marks=pytest.mark.slow)
                                  for name in sorted(ZOO)])  # Hopper and Walker2d: with -m slow (~6 s each)
def test_tiny_run_of_each_mujoco_config(tmp_path, name):
    pytest.importorskip("gymnasium.envs.mujoco.mujoco_rendering", reason='the mujoco extra is not installed (pip install -e ".[mujoco]")')
    from rlearn.run import train

    cfg = load_config(name, overrides=tiny_overrides(name))
    result = train(cfg, work_dir=tmp_path / name, progress=False)
    assert result.stop_reason == "max_env_steps" and result.envstep == cfg["train"]["max_env_steps"]
    rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    lr_key = "cur_lr_avg" if name.startswith("ppo") else "cur_lr_critic_avg"
    lrs = [row[lr_key] for row in rows if lr_key in row]
    lr = ZOO[name]["lr" if name.startswith("ppo") else "lr_critic"]
    assert lrs and all(value == pytest.approx(lr, rel=1e-12) for value in lrs)  # the config's lr is what trained
    if name.startswith("ppo"):
        assert result.train_iter == 2
    else:
        assert result.train_iter == 100
    assert result.last_eval is not None and result.last_eval["episode_length_mean"] >= 1


def test_rlearn_train_mujoco_config_from_the_command_line(tmp_path):
    pytest.importorskip("gymnasium.envs.mujoco.mujoco_rendering", reason='the mujoco extra is not installed (pip install -e ".[mujoco]")')
    work = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "rlearn", "train", "sac_halfcheetah", "--work-dir", str(work),
                           "--no-progress", "--set", *tiny_overrides("sac_halfcheetah")],
                          capture_output=True, text=True, cwd=REPO, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'id': 'HalfCheetah-v5'" in (work / "config.py").read_text()


# --------------------------------------------------------------------------------- without MuJoCo
def test_without_mujoco_the_error_is_one_line_saying_what_to_install(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "mujoco.py").write_text('raise ImportError("No module named \'mujoco\'")\n')  # as if not installed
    env = {**os.environ, "PYTHONPATH": str(shim), "RLEARN_NO_PROGRESS": "1"}
    proc = subprocess.run([sys.executable, "-m", "rlearn", "train", "sac_halfcheetah", "--work-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO, env=env, timeout=280)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        "rlearn train: error: env ('HalfCheetah-v5'): environment 'HalfCheetah-v5' needs MuJoCo, which is not "
        'installed: pip install -e ".[mujoco]"'
    ]
    assert "Traceback" not in proc.stdout + proc.stderr
