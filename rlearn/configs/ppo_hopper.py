"""PPO on Hopper-v5 with rl-baselines3-zoo's tuned settings, without observation/reward normalisation, 1M steps.

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/ppo.yml``, section "Tuned # 10 mujoco envs", ``Hopper-v4`` (below
in rlearn's names; one environment, ``n_steps 512``, ``n_timesteps 1e6``). Two differences: the zoo also sets
``normalize: true`` (SB3's ``VecNormalize``), which rlearn does not have, and rlearn's PPO initialises its layers
orthogonally (the zoo: ``ortho_init=False``). The zoo's result: 2,410 +- 10 on Hopper-v3 after 1M steps
(``benchmark.md``).

``rlearn train ppo_hopper`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import PPO_RELU_256, ppo

config = ppo(
    "Hopper-v5",
    minibatch_size=32,
    epochs=5,
    gamma=0.999,
    gae_lambda=0.99,
    lr=9.80828e-05,
    entropy_coef=0.00229519,
    value_coef=0.835671,
    max_grad_norm=0.7,
    **PPO_RELU_256,
)
