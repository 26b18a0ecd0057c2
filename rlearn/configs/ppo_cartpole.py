"""PPO on CartPole-v1 with rl-zoo's tuned hyper-parameters; reaches the maximum return of 500 within 100k env steps.

``rlearn train ppo_cartpole`` trains it for 100k env steps with rl-zoo's ``hyperparams/ppo.yml`` settings
(docs/ppo.md). If you change ``train.max_env_steps``, change the LR scheduler's ``total_iters`` with it
(= max_env_steps / (num_envs * rollout_steps), rounded up).
"""

NUM_ENVS, ROLLOUT_STEPS, MAX_ENV_STEPS = 8, 32, 100_000
ITERATIONS = -(-MAX_ENV_STEPS // (NUM_ENVS * ROLLOUT_STEPS))  # 391 updates

config = dict(  # what differs from the defaults of docs/configuration.md and PPOPolicy.Config
    env=dict(id="CartPole-v1", num_envs=NUM_ENVS),
    policy=dict(
        type="ppo",
        rollout_steps=ROLLOUT_STEPS,  # one update = 8 envs x 32 steps = 256 transitions
        gamma=0.98,
        gae_lambda=0.8,
        epochs=20,
        minibatch_size=256,  # the whole rollout: one gradient step per epoch
        clip_follows_lr=True,  # the clip range decays with the lr: rl-zoo's lin_0.2
        lr=1e-3,
    ),
    learner=dict(
        log_freq=10,  # a table every 10 updates (2560 env steps), each column the mean of those 10 updates
        monitor_window=10,
        # linear decay of the lr to 0 over the run (rl-zoo's lin_1e-3)
        hooks=[dict(type="LRSchedulerHook",
                    scheduler=dict(type="LinearLR", start_factor=1.0, end_factor=0.0, total_iters=ITERATIONS))],
    ),
    eval=dict(freq=5_000, num_envs=10),
    checkpoint=dict(freq=100),
)
