"""PPG on CartPole-v1: first reaches the maximum return of 500 after about 8-30k env steps.

``rlearn train ppg_cartpole`` trains it for 100k env steps; the policy phase follows rl-zoo's PPO for CartPole.
``learner.log_freq`` and ``learner.monitor_window`` follow ``n_pi`` so every table averages real auxiliary
losses (docs/ppg.md). If you change ``train.max_env_steps``, change the LR scheduler's ``total_iters`` with it
(= max_env_steps / (num_envs * rollout_steps), rounded up).
"""

N_PI = 16  # policy iterations per auxiliary phase (PPGPolicy's default n_pi)
NUM_ENVS, ROLLOUT_STEPS, MAX_ENV_STEPS = 8, 32, 100_000
ITERATIONS = -(-MAX_ENV_STEPS // (NUM_ENVS * ROLLOUT_STEPS))  # 391 train iterations

config = dict(  # what differs from the defaults of docs/configuration.md and PPGPolicy.Config
    env=dict(id="CartPole-v1", num_envs=NUM_ENVS),
    policy=dict(
        type="ppg",
        reward_scale=0.1,  # value targets <= 5 instead of <= 50: the aux value head can fit them in few steps
        e_policy=20,  # PPO epochs per iteration
        clip_follows_lr=True,  # the clip range decays with the lr, like rl-zoo's lin_0.2
        e_value=20,  # value-network epochs per iteration
        e_aux=6,  # the paper's 6 epochs over the 16 stored rollouts (4096 observations): 48 steps per phase,
        #          enough for the aux value head to fit targets near 5 (with 1 epoch it never did; docs/ppg.md)
    ),
    learner=dict(
        log_freq=N_PI,  # a table right after every auxiliary phase...
        monitor_window=2 * N_PI,  # ...averaging the last 32 iterations: 32 policy values, exactly 2 aux values
        # linear decay of both optimizers' lr to 0 over the run (rl-zoo's lin_1e-3)
        hooks=[dict(type="LRSchedulerHook",
                    scheduler=dict(type="LinearLR", start_factor=1.0, end_factor=0.0, total_iters=ITERATIONS))],
    ),
    eval=dict(freq=5_000, num_envs=10),
    checkpoint=dict(freq=8 * N_PI),
)
