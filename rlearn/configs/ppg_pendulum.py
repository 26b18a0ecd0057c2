"""PPG on Pendulum-v1 (continuous actions): passes the -250 "solved" line after about 40k env steps.

``rlearn train ppg_pendulum`` trains it for 200k env steps. A Gaussian policy with a state-independent
log-std; the sampled torque is clipped to [-2, 2] for the environment while log-probabilities use the
unclipped sample. Short horizon (gamma 0.9) and rewards scaled by 0.1, as PPO settings for Pendulum usually
have. ``learner.log_freq`` and ``learner.monitor_window`` follow ``n_pi`` (see docs/ppg.md).
"""

N_PI = 8  # policy iterations per auxiliary phase
NUM_ENVS, ROLLOUT_STEPS, MAX_ENV_STEPS = 8, 256, 200_000
ITERATIONS = -(-MAX_ENV_STEPS // (NUM_ENVS * ROLLOUT_STEPS))  # 98 train iterations

config = dict(
    exp_name="ppg_pendulum",
    seed=0,
    device="cpu",
    num_threads=1,  # small networks: one torch thread is fastest
    profile=False,  # True (or RLEARN_PROFILE=1) records a timeline trace
    env=dict(id="Pendulum-v1", num_envs=NUM_ENVS, asynchronous=False, kwargs={}),
    policy=dict(
        type="ppg",
        rollout_steps=ROLLOUT_STEPS,  # one iteration = 8 envs x 256 steps = 2048 transitions
        gamma=0.9,
        gae_lambda=0.95,
        reward_scale=0.1,  # rewards in [-1.6, 0]
        e_policy=10,  # PPO epochs per iteration, 8 minibatches each
        minibatch_size=256,
        clip_ratio=0.2,
        clip_follows_lr=False,
        entropy_coef=0.0,
        max_grad_norm=0.5,
        e_value=10,
        n_pi=N_PI,
        e_aux=2,  # auxiliary epochs over the 8 stored rollouts (16384 observations)
        aux_minibatch_size=512,
        beta_clone=1.0,
        hidden_sizes=[64, 64],
        activation="tanh",
        init_log_std=0.0,  # initial std 1 (half the torque bound)
        lr=1e-3,
    ),
    buffer=dict(size=100_000),  # unused on-policy
    train=dict(max_env_steps=MAX_ENV_STEPS, collect_steps=1, updates_per_step=1.0),
    learner=dict(
        log_freq=N_PI,  # a table right after every auxiliary phase...
        monitor_window=2 * N_PI,  # ...averaging the last 16 iterations: 16 policy values, exactly 2 aux values
        monitor_windows={},
        strict=False,
        hooks=[
            # linear decay of the three optimizers' lr to 0 over the run: steadier returns late in training
            dict(type="LRSchedulerHook",
                 scheduler=dict(type="LinearLR", start_factor=1.0, end_factor=0.0, total_iters=ITERATIONS)),
        ],
    ),
    eval=dict(freq=8_192, episodes=10, num_envs=10, stop_value=None),
    checkpoint=dict(freq=4 * N_PI, keep=3),
)
