"""The settings the bundled MuJoCo configs share (``td3_*``, ``sac_*``, ``ppo_*`` on ``halfcheetah``, ``hopper``,
``walker2d``): rl-baselines3-zoo's hyperparameters for the MuJoCo locomotion tasks, on gymnasium's v5 tasks.

Not a config itself (a module starting with ``_`` is not listed by ``rlearn train --list-configs``). Each
function returns only what differs from rlearn's defaults (docs/configuration.md and the policy's ``Config``);
the sources are cited in each config's docstring and in docs/mujoco.md.
"""

from __future__ import annotations

from typing import Any, Dict

#: env steps of every MuJoCo run: the zoo's ``n_timesteps: !!float 1e6``
MAX_ENV_STEPS = 1_000_000


def _off_policy(algo: str, env_id: str, **policy: Any) -> Dict[str, Any]:
    """An off-policy run of the zoo's MuJoCo defaults: 10,000 random steps first, a 1M replay buffer, one gradient
    step per env step (rlearn's default), logged every 1,000 iterations."""
    return dict(
        env=dict(id=env_id),
        policy=dict(
            type=algo,
            learning_starts=10_000,  # the zoo's learning_starts: uniformly random actions, then one update per step
            learn_threads=2,  # torch threads of a train iteration: both cores (one while they do not pay)
            **policy,
        ),
        buffer=dict(size=1_000_000),
        train=dict(max_env_steps=MAX_ENV_STEPS),
        learner=dict(log_freq=1_000),
        eval=dict(num_envs=10),  # every 10,000 env steps (the default): 10 deterministic episodes, stepped together
    )


def td3(env_id: str) -> Dict[str, Any]:
    """TD3 with the zoo's ``&mujoco-defaults``: SB3's TD3 defaults ([400, 300], lr 1e-3, batch 256, gamma 0.99,
    tau 0.005, policy delay 2, target noise 0.2 clipped at 0.5) and Gaussian exploration noise 0.1 (the last
    six are rlearn's defaults too)."""
    return _off_policy("td3", env_id, hidden_sizes=[400, 300], lr_actor=1e-3, lr_critic=1e-3)


def sac(env_id: str) -> Dict[str, Any]:
    """SAC with the zoo's ``&mujoco-defaults``: SB3's SAC defaults ([256, 256], lr 3e-4 for actor, critics and
    temperature, batch 256, gamma 0.99, tau 0.005, automatic temperature), all rlearn's defaults too."""
    return _off_policy("sac", env_id)


#: the zoo's ``policy_kwargs`` of its tuned HalfCheetah and Hopper PPO (``log_std_init=-2``, ReLU,
#: ``net_arch=dict(pi=[256, 256], vf=[256, 256])``) in rlearn's names; rlearn's PPO keeps its orthogonal init
#: where the zoo sets ``ortho_init=False``
PPO_RELU_256 = dict(hidden_sizes=[256, 256], activation="relu", init_log_std=-2.0)


def ppo(env_id: str, **policy: Any) -> Dict[str, Any]:
    """PPO with the zoo's tuned per-task settings ``policy`` (in rlearn's names) on one environment, 512 steps per
    update; a table every 20 updates (10,240 env steps), evaluated every 10,240 env steps."""
    return dict(
        env=dict(id=env_id),
        policy=dict(type="ppo", rollout_steps=512, **policy),
        train=dict(max_env_steps=MAX_ENV_STEPS),
        learner=dict(log_freq=20, monitor_window=20),
        eval=dict(freq=10_240, num_envs=10),
        checkpoint=dict(freq=100),
    )
