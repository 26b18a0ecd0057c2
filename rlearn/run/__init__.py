"""A training run from one config: :func:`train` / :class:`Trainer` build the parts (:mod:`~rlearn.run.build`) in
a work dir (:mod:`~rlearn.run.workdir`) and run the off- or on-policy loop with evaluation, checkpoints and signal
handling, returning a :class:`RunResult` (docs/architecture.md, "Run")."""

from rlearn.run.build import EPISODES_PER_WINDOW, episode_window
from rlearn.run.loop import EPISODE_KEYS
from rlearn.run.result import RunResult, summary_lines
from rlearn.run.state import RunState
from rlearn.run.trainer import Trainer, train

__all__ = [
    "train", "Trainer", "RunResult", "RunState", "summary_lines", "episode_window", "EPISODE_KEYS",
    "EPISODES_PER_WINDOW",
]
