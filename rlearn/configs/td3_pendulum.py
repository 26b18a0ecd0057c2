"""TD3 on Pendulum-v1: the rl-zoo hyperparameters, solved (return >= -200) in about 20k env steps.

``rlearn train td3_pendulum`` trains it; ``--set train.max_env_steps=...`` shortens the run. See docs/td3.md.
"""

config = dict(  # what differs from the defaults of docs/configuration.md and TD3Policy.Config
    env=dict(id="Pendulum-v1"),
    policy=dict(
        type="td3",
        learning_starts=10_000,  # uniformly random actions first; the learner starts after as many steps
        hidden_sizes=[400, 300],
        lr_actor=1e-3,
        lr_critic=1e-3,
        gamma=0.98,
        learn_threads=2,  # torch threads of a train iteration: both cores (one while another process makes two slower)
    ),
    buffer=dict(size=200_000),
    train=dict(max_env_steps=20_000),  # one gradient step per env step
    learner=dict(log_freq=1_000),
    eval=dict(freq=5_000),
)
