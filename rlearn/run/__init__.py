"""A training run from one config: work dir, signals, build, the off-/on-policy loop, evaluation,
checkpoints, result (see docs/architecture.md, "Run").

Data flow of one run::

    vector env -> Collector -> ReplayBuffer (off-policy) / rollout tensors (on-policy)
               -> BaseLearner.train -> policy._forward_learn -> monitor -> hooks -> log, tb/, ckpt/

* :func:`train` / :class:`Trainer` (:mod:`~rlearn.run.trainer`): build, then run; the same code runs
  one process or one rank of several (``torchrun``, ``rlearn train CONFIG --nproc N``).
* :mod:`~rlearn.run.workdir`: which directory a run writes to, and which checkpoint it resumes from.
* :mod:`~rlearn.run.signals`: Ctrl-C and SIGTERM stop a one-process run at a safe point (with a checkpoint);
  the launcher's SIGTERM, or its death, ends a rank.
* :mod:`~rlearn.run.failure`: the error that ends a run, as the last line of its log.
* :mod:`~rlearn.run.build`: environments, policy, buffer, learner and its default hooks from the config.
* :mod:`~rlearn.run.off_policy` / :mod:`~rlearn.run.on_policy`: the two loops (:mod:`~rlearn.run.loop`:
  what they share, collecting and recording ended episodes).
* :class:`rlearn.hooks.EvalHook`: evaluation every ``eval.freq`` env steps and at the end, ``eval.stop_value``.
* :mod:`~rlearn.run.state`: the run's counters in checkpoints (``states["pipeline"]``).
* :mod:`~rlearn.run.ranks`: per-rank seeds and the end-of-run parameter check.
* :mod:`~rlearn.run.result`: :class:`RunResult` and the closing summary lines.
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
