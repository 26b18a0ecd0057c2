"""PPO on Pendulum-v1 (continuous actions) with rl-zoo's hyper-parameters, without gSDE: passes -250 after about 49k env steps.

``rlearn train ppo_pendulum`` trains it for 200k env steps. The settings are those of rl-baselines3-zoo's
``hyperparams/ppo.yml`` for Pendulum-v1: 4 envs x 1024 steps (4096 transitions per update), minibatches of
64 (SB3's default), 10 epochs, gamma 0.9, gae_lambda 0.95, no entropy bonus, constant learning rate 1e-3,
clip range 0.2, and SB3's defaults for the rest (value_coef 0.5, max_grad_norm 0.5, advantages normalised
per minibatch, 64-64 tanh actor and critic). rl-zoo also sets ``use_sde=True`` (generalised state-dependent
exploration), which rlearn's PPO does not implement: actions are sampled from a diagonal Gaussian with a
learned, state-independent log-std (initial std 1, half the torque bound); the sampled torque is clipped to
[-2, 2] for the environment while log-probabilities use the unclipped sample (docs/ppo.md).
"""

NUM_ENVS, ROLLOUT_STEPS, MAX_ENV_STEPS = 4, 1024, 200_000

config = dict(  # what differs from the defaults of docs/configuration.md and PPOPolicy.Config
    env=dict(id="Pendulum-v1", num_envs=NUM_ENVS),
    policy=dict(
        type="ppo",
        rollout_steps=ROLLOUT_STEPS,  # one update = 4 envs x 1024 steps = 4096 transitions
        gamma=0.9,
        lr=1e-3,  # minibatches of 64 (the default): 64 per epoch, 640 gradient steps per update
    ),
    train=dict(max_env_steps=MAX_ENV_STEPS),
    learner=dict(log_freq=2, monitor_window=2),  # a table every 2 updates (8192 env steps)
    eval=dict(freq=8_192, num_envs=10),
    checkpoint=dict(freq=10),
)
