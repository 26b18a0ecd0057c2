"""SAC on Pendulum-v1: the rl-zoo hyperparameters (lr 1e-3, otherwise SB3's defaults), 20k env steps.

``rlearn train sac_pendulum`` trains it; ``--set train.max_env_steps=...`` shortens the run. See docs/sac.md.
"""

config = dict(
    exp_name="sac_pendulum",
    seed=0,
    device="cpu",
    num_threads=1,  # torch threads outside train iterations (collection, evaluation)
    profile=False,  # True (or RLEARN_PROFILE=1) records a timeline trace
    env=dict(id="Pendulum-v1", num_envs=1, asynchronous=False, kwargs={}),
    policy=dict(
        type="sac",
        learning_starts=100,  # uniformly random actions first; the learner starts after as many steps
        batch_size=256,
        hidden_sizes=[256, 256],
        lr_actor=1e-3,
        lr_critic=1e-3,
        lr_alpha=1e-3,
        gamma=0.99,
        tau=0.005,
        policy_frequency=2,  # CleanRL's delayed actor: 2 actor + alpha updates every 2nd iteration (1 per step)
        autotune=True,  # SB3's ent_coef="auto"
        init_alpha=1.0,
        target_entropy=None,  # -dim(A)
        log_std_min=-20.0,
        log_std_max=2.0,
        learn_threads=2,  # torch threads of a train iteration: both cores
        adaptive_threads=True,  # ...but one while another process makes two slower (measured every 1000 iters)
        precision="fp32",  # "bf16": bfloat16 products, fp32 parameters (faster on CPUs with native bf16; docs/speed-parts.md)
    ),
    buffer=dict(size=1_000_000),
    train=dict(max_env_steps=20_000, collect_steps=1, updates_per_step=1.0),  # one gradient step per env step
    learner=dict(log_freq=1_000, monitor_window=None, monitor_windows={}, strict=False, hooks=[]),
    eval=dict(freq=5_000, episodes=10, num_envs=1, stop_value=None),
    checkpoint=dict(freq=10_000, keep=3),
)
