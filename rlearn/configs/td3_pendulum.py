"""TD3 on Pendulum-v1: the rl-zoo hyperparameters, solved (return >= -200) in about 20k env steps.

``rlearn train td3_pendulum`` trains it; ``--set train.max_env_steps=...`` shortens the run. See docs/td3.md.
"""

config = dict(
    exp_name="td3_pendulum",
    seed=0,
    device="cpu",
    num_threads=1,  # torch threads outside train iterations (collection, evaluation)
    profile=False,  # True (or RLEARN_PROFILE=1) records a timeline trace
    env=dict(id="Pendulum-v1", num_envs=1, asynchronous=False, kwargs={}),
    policy=dict(
        type="td3",
        learning_starts=10_000,  # uniformly random actions first; the learner starts after as many steps
        batch_size=256,
        actor_update_freq=2,  # delayed actor and target updates
        hidden_sizes=[400, 300],
        lr_actor=1e-3,
        lr_critic=1e-3,
        gamma=0.98,
        tau=0.005,
        exploration_noise=0.1,  # in normalised action units: 0.1 = 5% of the torque range
        target_noise=0.2,
        target_noise_clip=0.5,
        learn_threads=2,  # torch threads of a train iteration: both cores
        adaptive_threads=True,  # ...but one while another process makes two slower (measured every 1000 iters)
        precision="fp32",  # "bf16": bfloat16 products, fp32 parameters (faster on CPUs with native bf16; docs/speed-parts.md)
    ),
    buffer=dict(size=200_000),
    train=dict(max_env_steps=20_000, collect_steps=1, updates_per_step=1.0),  # one gradient step per env step
    learner=dict(log_freq=1_000, monitor_window=None, monitor_windows={}, strict=False, hooks=[]),
    eval=dict(freq=5_000, episodes=10, num_envs=1, stop_value=None),
    checkpoint=dict(freq=10_000, keep=3),
)
