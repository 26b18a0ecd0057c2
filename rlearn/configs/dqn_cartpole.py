"""DQN on CartPole-v1 with rl-baselines3-zoo's hyperparameters (``hyperparams/dqn.yml``, CartPole-v1).

rl-zoo's settings and their rlearn names: ``n_timesteps=5e4`` (``train.max_env_steps``), ``learning_rate=2.3e-3``,
``batch_size=64``, ``buffer_size=100000`` (``buffer.size``), ``learning_starts=1000``, ``gamma=0.99``,
``train_freq=256`` and ``gradient_steps=128`` (``train.collect_steps=256``, ``train.updates_per_step=0.5``),
``exploration_fraction=0.16`` of the 50k steps and ``exploration_final_eps=0.04`` (``exploration_steps=8000``),
``net_arch=[256, 256]``, and Stable-Baselines3's defaults for the rest (Huber loss, ``max_grad_norm=10``,
``tau=1``, plain -- not double -- DQN).

``target_update_interval``: rl-zoo's 10 counts *env steps* (SB3 syncs the target during collection). The Q-network
only changes during the training phases of 128 gradient steps, so each phase learns against the network as it was
after the previous phase: a sync every 128 *train iterations*, which is how rlearn counts it (docs/dqn.md).

``rlearn train dqn_cartpole`` trains it; ``--set train.max_env_steps=...`` shortens the run (the epsilon schedule
is in env steps and does not shrink with it).
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
