"""PPG on CartPole-v1: first reaches the maximum return of 500 after about 8-30k env steps.

``rlearn train ppg_cartpole`` trains it for 100k env steps. The policy-phase settings follow rl-zoo's PPO
for CartPole (8 envs x 32 steps, one minibatch of 256, 20 epochs, lr 1e-3 and clip range 0.2 decayed linearly); the
auxiliary phase runs every 16 iterations. ``learner.log_freq`` and ``learner.monitor_window`` are derived
from ``n_pi`` so that every table and TensorBoard point averages real auxiliary losses (docs/ppg.md).
If you change ``train.max_env_steps``, change the LR scheduler's ``total_iters`` with it
(= max_env_steps / (num_envs * rollout_steps), rounded up).
"""

N_PI = 16  # policy iterations per auxiliary phase
NUM_ENVS, ROLLOUT_STEPS, MAX_ENV_STEPS = 8, 32, 100_000
ITERATIONS = -(-MAX_ENV_STEPS // (NUM_ENVS * ROLLOUT_STEPS))  # 391 train iterations

config = dict(
    exp_name="ppg_cartpole",
    seed=0,
    device="cpu",
    num_threads=1,  # small networks: one torch thread is fastest
    profile=False,  # True (or RLEARN_PROFILE=1) records a timeline trace
    env=dict(id="CartPole-v1", num_envs=NUM_ENVS, asynchronous=False, kwargs={}),
    policy=dict(
        type="ppg",
        rollout_steps=ROLLOUT_STEPS,  # one iteration = 8 envs x 32 steps = 256 transitions
        gamma=0.98,
        gae_lambda=0.8,
        reward_scale=0.1,  # value targets <= 5 instead of <= 50: the aux value head can fit them in few steps
        e_policy=20,  # PPO epochs per iteration
        minibatch_size=256,
        clip_ratio=0.2,
        clip_follows_lr=True,  # the clip range decays with the lr, like rl-zoo's lin_0.2
        entropy_coef=0.0,
        max_grad_norm=0.5,
        e_value=20,  # value-network epochs per iteration
        n_pi=N_PI,
        e_aux=6,  # the paper's 6 epochs over the 16 stored rollouts (4096 observations): 48 steps per phase,
        #          enough for the aux value head to fit targets near 5 (with 1 epoch it never did; docs/ppg.md)
        aux_minibatch_size=512,
        beta_clone=1.0,
        hidden_sizes=[64, 64],
        activation="tanh",
        init_log_std=0.0,  # unused by discrete actions
        lr=1e-3,
    ),
    buffer=dict(size=100_000),  # unused on-policy
    train=dict(max_env_steps=MAX_ENV_STEPS, collect_steps=1, updates_per_step=1.0),
    learner=dict(
        log_freq=N_PI,  # a table right after every auxiliary phase...
        monitor_window=2 * N_PI,  # ...averaging the last 32 iterations: 32 policy values, exactly 2 aux values
        monitor_windows={},
        strict=False,
        hooks=[
            # linear decay of both optimizers' lr to 0 over the run (rl-zoo's lin_1e-3)
            dict(type="LRSchedulerHook",
                 scheduler=dict(type="LinearLR", start_factor=1.0, end_factor=0.0, total_iters=ITERATIONS)),
        ],
    ),
    eval=dict(freq=5_000, episodes=10, num_envs=10, stop_value=None),
    checkpoint=dict(freq=8 * N_PI, keep=3),
)
