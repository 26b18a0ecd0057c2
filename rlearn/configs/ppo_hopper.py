"""PPO on Hopper-v5 with rl-baselines3-zoo's tuned settings, without observation/reward normalisation, 1M steps.

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/ppo.yml``, section "Tuned # 10 mujoco envs", ``Hopper-v4``:
``n_envs 1``, ``n_steps 512``, ``batch_size 32``, ``n_epochs 5``, ``gamma 0.999``, ``gae_lambda 0.99``,
``learning_rate 9.80828e-05``, ``clip_range 0.2``, ``ent_coef 0.00229519``, ``vf_coef 0.835671``,
``max_grad_norm 0.7``, ``policy_kwargs: log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
net_arch=dict(pi=[256, 256], vf=[256, 256])``, ``n_timesteps 1e6``. Two differences: the zoo also sets
``normalize: true`` (SB3's ``VecNormalize``), which rlearn does not have, and rlearn's PPO initialises its layers
orthogonally. The zoo's result: 2,410 +- 10 on Hopper-v3 after 1M steps (``benchmark.md``).

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
