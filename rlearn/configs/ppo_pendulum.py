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

config = dict(
    exp_name="ppo_pendulum",
    seed=0,
    device="cpu",
    num_threads=1,  # small networks: one torch thread is fastest
    profile=False,  # True (or RLEARN_PROFILE=1) records a timeline trace
    env=dict(id="Pendulum-v1", num_envs=NUM_ENVS, asynchronous=False, kwargs={}),
    policy=dict(
        type="ppo",
        rollout_steps=ROLLOUT_STEPS,  # one update = 4 envs x 1024 steps = 4096 transitions
        gamma=0.9,
        gae_lambda=0.95,
        reward_scale=1.0,
        epochs=10,
        minibatch_size=64,  # 64 minibatches per epoch, 640 gradient steps per update
        clip_ratio=0.2,
        clip_follows_lr=False,
        clip_value=None,
        entropy_coef=0.0,
        value_coef=0.5,
        normalize_advantage=True,
        max_grad_norm=0.5,
        target_kl=None,  # set e.g. 0.02 to stop an update's epochs early (reported as early_stop_epoch)
        hidden_sizes=[64, 64],
        activation="tanh",
        init_log_std=0.0,
        lr=1e-3,
    ),
    buffer=dict(size=100_000),  # unused on-policy
    train=dict(max_env_steps=MAX_ENV_STEPS, collect_steps=1, updates_per_step=1.0),
    learner=dict(
        log_freq=2,  # a table every 2 updates (8192 env steps)
        monitor_window=2,
        monitor_windows={},
        strict=False,
        hooks=[],
    ),
    eval=dict(freq=8_192, episodes=10, num_envs=10, stop_value=None),
    checkpoint=dict(freq=10, keep=3),
)
