"""PPO on Pendulum-v1 (continuous actions) with rl-zoo's hyper-parameters, without gSDE: passes -250 after about 49k env steps.

``rlearn train ppo_pendulum`` trains it for 200k env steps with rl-zoo's ``hyperparams/ppo.yml`` settings, but
a state-independent Gaussian log-std instead of gSDE (docs/ppo.md).
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
