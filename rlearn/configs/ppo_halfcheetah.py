"""PPO on HalfCheetah-v5 with rl-baselines3-zoo's tuned settings, without observation/reward normalisation, 1M steps.

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/ppo.yml``, section "Tuned # 10 mujoco envs", ``HalfCheetah-v4``
(below in rlearn's names; one environment, ``n_steps 512``, ``n_timesteps 1e6``). Two differences: the zoo also
sets ``normalize: true`` (SB3's ``VecNormalize``), which rlearn does not have, and rlearn's PPO initialises its
layers orthogonally (the zoo: ``ortho_init=False``). Expect less than the zoo's 5,819 +- 664 on HalfCheetah-v3
after 1M steps (``benchmark.md``) until rlearn normalises observations.

``rlearn train ppo_halfcheetah`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import PPO_RELU_256, ppo

config = ppo(
    "HalfCheetah-v5",
    epochs=20,
    gamma=0.98,
    gae_lambda=0.92,
    lr=2.0633e-05,
    clip_ratio=0.1,
    entropy_coef=0.000401762,
    value_coef=0.58096,
    max_grad_norm=0.8,
    **PPO_RELU_256,
)
