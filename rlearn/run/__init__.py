"""A training run from one config: :func:`train` / :class:`Trainer` build the parts (:mod:`~rlearn.run.build`)
in the chosen work dir (:mod:`~rlearn.run.workdir`), then run the off- or on-policy loop with evaluation,
checkpoints and signal handling, and return a :class:`RunResult` (see docs/architecture.md, "Run")::

    vector env -> Collector -> ReplayBuffer (off-policy) / rollout tensors (on-policy)
               -> BaseLearner.train -> policy._forward_learn -> monitor -> hooks -> log, tb/, ckpt/
"""

from rlearn.run.build import EPISODES_PER_WINDOW, episode_window
from rlearn.run.loop import EPISODE_KEYS
from rlearn.run.result import RunResult, summary_lines
from rlearn.run.state import RunState
from rlearn.run.trainer import Trainer, train

__all__ = [
    "train", "Trainer", "RunResult", "RunState", "summary_lines", "episode_window", "EPISODE_KEYS",
    "EPISODES_PER_WINDOW",
]
