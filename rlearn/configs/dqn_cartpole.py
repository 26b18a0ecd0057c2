"""DQN on CartPole-v1 with rl-baselines3-zoo's hyperparameters (``hyperparams/dqn.yml``, CartPole-v1).

``rlearn train dqn_cartpole`` trains it for 50k env steps. rl-zoo's ``train_freq=256, gradient_steps=128`` is
``train.collect_steps=256, train.updates_per_step=0.5``, and its ``target_update_interval=10`` env steps is one
sync per training phase, 128 train iterations here (docs/dqn.md).
"""

config = dict(  # what differs from the defaults of docs/configuration.md and DQNPolicy.Config
    env=dict(id="CartPole-v1"),
    policy=dict(
        type="dqn",
        learning_starts=1000,  # uniformly random actions first; the learner starts after as many steps
        batch_size=64,
        hidden_sizes=[256, 256],
        lr=2.3e-3,
        target_update_interval=128,  # train iterations: once per training phase (rl-zoo: 10 env steps)
        exploration_final_eps=0.04,
        exploration_steps=8_000,  # 0.16 x 50k env steps
    ),
    # 256 env steps, then 128 gradient steps (rl-zoo's train_freq=256, gradient_steps=128)
    train=dict(max_env_steps=50_000, collect_steps=256, updates_per_step=0.5),
    learner=dict(log_freq=512),
    eval=dict(freq=5_000, num_envs=10),
    checkpoint=dict(freq=6_400, keep=2),
)
