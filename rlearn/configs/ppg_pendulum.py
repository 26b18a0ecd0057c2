"""PPG on Pendulum-v1 (continuous actions): passes the -250 "solved" line after about 40k env steps.

``rlearn train ppg_pendulum`` trains it for 200k env steps, with a Gaussian policy (state-independent log-std)
and gamma 0.9, rewards scaled by 0.1. ``learner.log_freq`` and ``learner.monitor_window`` follow ``n_pi``
(docs/ppg.md).
"""

N_PI = 8  # policy iterations per auxiliary phase
NUM_ENVS, ROLLOUT_STEPS, MAX_ENV_STEPS = 8, 256, 200_000
ITERATIONS = -(-MAX_ENV_STEPS // (NUM_ENVS * ROLLOUT_STEPS))  # 98 train iterations

config = dict(  # what differs from the defaults of docs/configuration.md and PPGPolicy.Config
    env=dict(id="Pendulum-v1", num_envs=NUM_ENVS),
    policy=dict(
        type="ppg",
        rollout_steps=ROLLOUT_STEPS,  # one iteration = 8 envs x 256 steps = 2048 transitions
        gamma=0.9,
        gae_lambda=0.95,
        reward_scale=0.1,  # rewards in [-1.6, 0]
        n_pi=N_PI,  # e_policy and e_value 10, e_aux 2 over the 8 stored rollouts (16384 observations): the defaults
    ),
    train=dict(max_env_steps=MAX_ENV_STEPS),
    learner=dict(
        log_freq=N_PI,  # a table right after every auxiliary phase...
        monitor_window=2 * N_PI,  # ...averaging the last 16 iterations: 16 policy values, exactly 2 aux values
        # linear decay of the three optimizers' lr to 0 over the run: steadier returns late in training
        hooks=[dict(type="LRSchedulerHook",
                    scheduler=dict(type="LinearLR", start_factor=1.0, end_factor=0.0, total_iters=ITERATIONS))],
    ),
    eval=dict(freq=8_192, num_envs=10),
    checkpoint=dict(freq=4 * N_PI),
)
