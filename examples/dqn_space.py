"""A search space for ``rlearn tune dqn_cartpole --space examples/dqn_space.py`` (docs/experiments.md).

``space(trial)`` samples with the Optuna trial and returns ``--set`` overrides: dotted config keys and
their values. Each trial is then ``rlearn train dqn_cartpole --set <these>`` in a work dir of its own.
"""


def space(trial):
    return {
        "policy.lr": trial.suggest_float("lr", 1e-4, 1e-2, log=True),
        "policy.batch_size": trial.suggest_categorical("batch_size", [32, 64, 128]),
        "policy.target_update_interval": trial.suggest_categorical("target_update_interval", [64, 128, 256]),
        "policy.exploration_steps": trial.suggest_int("exploration_steps", 1_000, 10_000, step=1_000),
    }
