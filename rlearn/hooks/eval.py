"""``EvalHook``: evaluate the deterministic policy every ``freq`` env steps and at the end; keep the best model,
stop at a target or when evaluations stop improving, record raw numbers and videos (see docs/evaluation.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from rlearn.fileio import atomic_write_bytes
from rlearn.hooks.base import Hook, Priority
from rlearn.hooks.eval_state import EvalProgress, EvalState, read_evaluations
from rlearn.registry import HOOKS
from rlearn.trace import NOOP_SPAN, span
from rlearn.values import check_int, is_real

__all__ = ["EvalHook", "EvalState", "EvalProgress", "EVAL_TB_KEYS", "EVALUATIONS_FILE", "BEST_CHECKPOINT",
           "STOP_VALUE", "NO_IMPROVEMENT", "VIDEO_NAME", "read_evaluations"]

#: keys of an evaluation result written to TensorBoard (``evaluator_step/<k>``, ``evaluator_iter/<k>``)
EVAL_TB_KEYS = ("episode_return_mean", "episode_return_std", "episode_return_min", "episode_return_max",
                "episode_length_mean")
#: the raw numbers of every evaluation, one JSON object per line, in the work dir
EVALUATIONS_FILE = "evaluations.jsonl"
#: the best model's checkpoint, in the checkpoint directory
BEST_CHECKPOINT = "best.pt"
#: why an evaluation asks the run to stop (:attr:`EvalHook.stop_reason`)
STOP_VALUE, NO_IMPROVEMENT = "stop_value", "no_improvement"
#: the hook's entry in a checkpoint
PROGRESS_ENTRY = "eval_progress"
#: the name a video is written under (TensorBoard: the image tag ``evaluator_step/video``)
VIDEO_NAME = "evaluator/video"


@HOOKS.register
class EvalHook(Hook):
    """Evaluate with ``evaluator`` (a :class:`rlearn.collect.Evaluator`; None: the run attaches its own) at each
    new multiple of ``freq`` env steps (None: only at the end); save ``ckpt/best.pt`` at each new best
    (``save_best``); ask the run to stop when ``episode_return_mean`` reaches ``stop_value`` or after ``patience``
    evaluations without a new best (:attr:`stop_reason` says which); with ``video``, record one episode as
    ``videos/envstep_<N>.mp4`` through :attr:`recorder` at the first evaluation after each new multiple of
    ``video_freq`` env steps (None: every one) and keep its path in :attr:`video_path` before the report.

    With several processes rank 0 evaluates and broadcasts the result and the stop decision, so every rank stops
    at the same iteration.
    """

    DEFAULT_PRIORITY = Priority.NORMAL

    def __init__(self, evaluator: Any = None, freq: Optional[int] = None, stop_value: Optional[float] = None,
                 patience: Optional[int] = None, save_best: bool = True, video: bool = False,
                 video_freq: Optional[int] = None) -> None:
        self.evaluator = evaluator
        self.freq = check_int("EvalHook freq", freq, optional=True)
        if stop_value is not None and not is_real(stop_value):
            raise ValueError(f"EvalHook stop_value must be a number or None, got {stop_value!r}")
        self.stop_value = None if stop_value is None else float(stop_value)
        self.patience = check_int("EvalHook patience", patience, optional=True)
        for name, flag in (("save_best", save_best), ("video", video)):
            if not isinstance(flag, bool):
                raise ValueError(f"EvalHook {name} must be True or False, got {flag!r}")
        self.save_best, self.video = save_best, video
        self.video_freq = check_int("EvalHook video_freq", video_freq, optional=True)
        self.recorder: Any = None
        self.video_path: Optional[Path] = None
        self.stop_reason: Optional[str] = None
        self.state = EvalState()
        self.progress = EvalProgress()

    def due(self, learner: Any) -> bool:
        """True when ``learner.envstep`` reached a new multiple of ``freq`` since the last evaluation."""
        return self.freq is not None and self.every_n_envsteps(learner, self.freq, self.state.last_envstep)

    def evaluate_if_due(self, learner: Any) -> bool:
        """Evaluate if :meth:`due`; True when the run should stop (see :attr:`stop_reason`)."""
        return self.due(learner) and self.evaluate(learner)

    def evaluate_at_end(self, learner: Any) -> None:
        """The final evaluation: only if none happened at this envstep already."""
        if self.state.last_envstep != learner.envstep:
            self.evaluate(learner)

    @property
    def last_return(self) -> Optional[float]:
        """``episode_return_mean`` of the last evaluation, or None."""
        result = self.state.last_result
        return None if result is None else result["episode_return_mean"]

    @property
    def best_return(self) -> Optional[float]:
        """The best ``episode_return_mean`` so far, or None."""
        return self.progress.best_return

    @staticmethod
    def best_path(learner: Any) -> Optional[Path]:
        """Where ``best.pt`` goes: the CheckpointHook's directory (``ckpt``) in the learner's work dir."""
        if getattr(learner, "work_dir", None) is None:
            return None
        dirname = next((h.dirname for h in learner.hooks if type(h).__name__ == "CheckpointHook"), "ckpt")
        return Path(learner.work_dir) / dirname / BEST_CHECKPOINT

    def evaluate(self, learner: Any) -> bool:
        """Evaluate now (rank 0) and report; True when the run should stop (the same on every rank):
        ``stop_value`` reached, or ``patience`` evaluations without a new best."""
        from rlearn import distributed as dist

        if self.evaluator is None:
            raise ValueError("EvalHook has no evaluator: pass one, or let rlearn.run attach the run's")
        envstep, train_iter = learner.envstep, learner.train_iter
        learner.call_hook("before_eval")
        if learner.rank == 0:
            with span("evaluator/eval", lane="evaluator", iter=train_iter):
                result, stop = self._evaluate(learner)
        else:
            result, stop = None, False
        if learner.world_size > 1:
            # only the ranks that wait record the wait (rank 0 sends the result it just computed)
            waiting = span("evaluator/wait_for_rank0", lane="evaluator", iter=train_iter) if learner.rank else NOOP_SPAN
            with waiting:
                result, stop = dist.broadcast_object((result, stop))
        self.state.last_result, self.state.last_envstep, self.state.last_iter = result, envstep, train_iter
        hub = getattr(learner, "message_hub", None)
        if hub is not None:  # runtime state for other hooks: the last evaluation and where it was measured
            hub.update_info("last_eval", {**dict(result), "envstep": envstep, "train_iter": train_iter})
        improved = self.progress.update(result["episode_return_mean"], envstep, train_iter)
        if improved and self.save_best:
            self._save_best(learner)
        self.stop_reason = STOP_VALUE if stop else None
        if not stop and self.patience is not None and self.progress.evals_since_best >= self.patience:
            self.stop_reason = NO_IMPROVEMENT
            best = "none" if self.progress.best_return is None else (
                f"{self.progress.best_return:.4g} at envstep {self.progress.best_envstep}")
            learner.logger.info(
                "no improvement: %d evaluations without a new best episode_return_mean (eval.patience %d; best %s); "
                "stopping", self.progress.evals_since_best, self.patience, best)
        learner.call_hook("after_eval")
        return self.stop_reason is not None

    def _evaluate(self, learner: Any) -> Tuple[Dict[str, float], bool]:
        import torch

        with torch.no_grad():
            result = self.evaluator.evaluate()
            self._append_raw(learner)
            clip = self._record_video(learner)
        self.video_path = None if clip is None else Path(clip.path)
        learner.logger.info(
            "evaluation at envstep %d (train_iter %d): episode_return %.4g +- %.4g (min %.4g, max %.4g) over %d "
            "episodes, episode_length %.1f", learner.envstep, learner.train_iter, result["episode_return_mean"],
            result["episode_return_std"], result["episode_return_min"], result["episode_return_max"],
            result["episodes"], result["episode_length_mean"])
        scalars = {f"evaluator/{key}": result[key] for key in EVAL_TB_KEYS}
        learner.write_scalars(scalars, learner.train_iter, learner.envstep)  # the table, TensorBoard...
        if clip is not None and getattr(clip, "images", None) is not None:
            # TensorBoard's Images dashboard plays it next to the curves (evaluator_step/video at this envstep)
            learner.write_video(VIDEO_NAME, clip.images, clip.fps, learner.train_iter, learner.envstep)
        stop = self.stop_value is not None and result["episode_return_mean"] >= self.stop_value
        if stop:
            learner.logger.info(
                "stop_value reached: episode_return_mean %.4g >= eval.stop_value %.4g at envstep %d; stopping",
                result["episode_return_mean"], self.stop_value, learner.envstep)
        return result, stop

    def _save_best(self, learner: Any) -> None:
        path = self.best_path(learner)
        if learner.rank != 0 or path is None:
            return
        with span("checkpoint/save_best", lane="checkpoint"):
            learner.save_checkpoint(path)
        learner.logger.info("best so far: episode_return_mean %.4g at envstep %d; saved %s",
                            self.progress.best_return, self.progress.best_envstep, path)

    def _append_raw(self, learner: Any) -> None:
        episodes = getattr(self.evaluator, "episodes", None)
        if getattr(learner, "work_dir", None) is None or episodes is None:
            return
        row = {"envstep": int(learner.envstep), "train_iter": int(learner.train_iter), "time": time.time(),
               "returns": [float(e["episode_return"]) for e in episodes],
               "lengths": [int(e["episode_length"]) for e in episodes]}
        path = Path(learner.work_dir) / EVALUATIONS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    def _record_video(self, learner: Any) -> Any:
        """The recorder's :class:`~rlearn.video.EpisodeVideo` if a video is due, else None."""
        if not self.video or getattr(learner, "work_dir", None) is None:
            return None
        last = self.progress.last_video_envstep
        if self.video_freq is not None and not self.every_n_envsteps(learner, self.video_freq, last):
            return None
        if self.recorder is None:
            raise ValueError("EvalHook(video=True) has no recorder: attach a rlearn.video.VideoRecorder, or let "
                             "rlearn.run attach the run's")
        from rlearn.video import video_file_name

        path = Path(learner.work_dir) / "videos" / video_file_name(learner.envstep)
        try:
            with span("evaluator/video", lane="evaluator", iter=learner.train_iter):
                clip = self.recorder.record(path, k=learner.envstep)
        except Exception as exc:  # a video is a by-product: it must not end the run
            self.video = False
            learner.logger.error("video at envstep %d failed (%s: %s); no more videos in this run",
                                 learner.envstep, type(exc).__name__, exc)
            return None
        self.progress.last_video_envstep = learner.envstep
        learner.logger.info("video: %s (episode return %.4g, %d steps)", clip.path, clip.episode_return, clip.length)
        return clip

    def before_save_checkpoint(self, learner: Any, checkpoint: Dict[str, Any]) -> None:
        checkpoint[PROGRESS_ENTRY] = self.progress.state_dict()

    def after_load_checkpoint(self, learner: Any, checkpoint: Dict[str, Any]) -> None:
        """Restore the progress; rank 0 drops the ``evaluations.jsonl`` rows of evaluations the checkpoint
        has not seen and sets aside a ``best.pt`` written after it."""
        self.progress = EvalProgress()
        saved = checkpoint.get(PROGRESS_ENTRY)
        if saved is not None:
            self.progress.load_state_dict(saved)
        if learner.rank != 0 or getattr(learner, "work_dir", None) is None:
            return
        self._rewind_raw(learner)
        self._set_aside_stale_best(learner)

    def _rewind_raw(self, learner: Any) -> None:
        """Keep the rows up to the last evaluation the restored state knows (``state.last_envstep``)."""
        path = Path(learner.work_dir) / EVALUATIONS_FILE
        if not path.is_file():
            return
        rows = read_evaluations(path)
        kept = [row for row in rows if row["envstep"] <= self.state.last_envstep]
        if len(kept) == len(rows) and path.read_text(encoding="utf-8").endswith("\n"):
            return
        atomic_write_bytes(path, "".join(json.dumps(row) + "\n" for row in kept).encode("utf-8"))
        if len(kept) != len(rows):
            learner.logger.info("%s: dropped %d evaluation(s) after envstep %d (written after the checkpoint)",
                                path, len(rows) - len(kept), self.state.last_envstep)

    def _set_aside_stale_best(self, learner: Any) -> None:
        """A ``best.pt`` that is not the restored best (saved after the checkpoint, by evaluations the resumed
        run repeats) is renamed ``best_rewound_envstep<N>.pt``, so ``best.pt`` and the summary agree."""
        import torch

        path = self.best_path(learner)
        if path is None or not path.is_file():
            return
        try:
            saved_at = int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["envstep"])
        except Exception:  # unreadable: set it aside too
            saved_at = -1
        if saved_at == self.progress.best_envstep:
            return
        target = path.with_name(f"best_rewound_envstep{saved_at}.pt" if saved_at >= 0 else "best_unreadable.pt")
        path.replace(target)
        learner.logger.warning(
            "%s (envstep %s) is not the best evaluation this checkpoint knows (%s); renamed to %s, the next "
            "new best writes %s again", path, saved_at if saved_at >= 0 else "unreadable",
            "none" if self.progress.best_envstep is None else f"envstep {self.progress.best_envstep}",
            target.name, path.name)

    def after_run(self, learner: Any) -> None:
        if self.recorder is not None and callable(getattr(self.recorder, "close", None)):
            self.recorder.close()
