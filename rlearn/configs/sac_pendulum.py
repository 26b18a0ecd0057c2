"""SAC on Pendulum-v1: the rl-zoo hyperparameters (lr 1e-3, otherwise SB3's defaults), 20k env steps.

``rlearn train sac_pendulum`` trains it; ``--set train.max_env_steps=...`` shortens the run. See docs/sac.md.
"""

config = dict(  # what differs from the defaults of docs/configuration.md and SACPolicy.Config
    env=dict(id="Pendulum-v1"),
    policy=dict(
        type="sac",
        lr_actor=1e-3,
        lr_critic=1e-3,
        lr_alpha=1e-3,
        learn_threads=2,  # torch threads of a train iteration: both cores (one while another process makes two slower)
    ),
    buffer=dict(size=1_000_000),
    train=dict(max_env_steps=20_000),  # one gradient step per env step
    learner=dict(log_freq=1_000),
    eval=dict(freq=5_000),
)
