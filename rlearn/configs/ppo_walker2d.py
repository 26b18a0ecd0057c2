"""PPO on Walker2d-v5 with rl-baselines3-zoo's tuned settings, without observation/reward normalisation, 1M steps.

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/ppo.yml``, section "Tuned # 10 mujoco envs", ``Walker2d-v4``
(below in rlearn's names; one environment, ``n_steps 512``, ``n_timesteps 1e6``, SB3's default networks, which
are rlearn's too). One difference: the zoo also sets ``normalize: true`` (SB3's ``VecNormalize``), which rlearn
does not have. The zoo's result: 3,479 +- 822 on Walker2d-v3 after 1M steps (``benchmark.md``).

``rlearn train ppo_walker2d`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import ppo

config = ppo(
    "Walker2d-v5",
    minibatch_size=32,
    epochs=20,
    lr=5.05041e-05,
    clip_ratio=0.1,
    entropy_coef=0.000585045,
    value_coef=0.871923,
    max_grad_norm=1.0,
)
