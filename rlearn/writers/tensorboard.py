"""``TensorBoardWriter``: every scalar on two x axes, train iterations and env steps (:func:`tb_tags`).

A ``None`` value gets no point, never a 0. The per-tag point counts are the checkpoint state, with which
:meth:`TensorBoardWriter.rewind` drops exactly the points written after the checkpoint. See docs/writers.md.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from rlearn.writers.base import ScalarValue, Writer, count, list_of, table_of
from rlearn.writers.tb_events import RewindReport, TBWriter, rewind_event_files

__all__ = ["TensorBoardWriter", "tb_tags", "HPARAMS_METRIC_PREFIX"]

#: the HParams metrics are the scalars ``hparams/<name>`` (``hparams/evaluator/episode_return_mean``)
HPARAMS_METRIC_PREFIX = "hparams/"


def tb_tags(name: str) -> Tuple[str, str]:
    """``(iteration-axis tag, env-step-axis tag)`` of a final name: ``learner_iter/k`` and ``learner_step/k``
    for ``k``; ``g_iter/k`` and ``g_step/k`` for ``g/k`` (split at the first ``/``)."""
    group, sep, rest = name.partition("/")
    if not sep:
        group, rest = "learner", name
    return f"{group}_iter/{rest}", f"{group}_step/{rest}"


class TensorBoardWriter(TBWriter, Writer):
    """Writes scalars to TensorBoard event files under ``logdir`` (``<work_dir>/tb``, made at the first write)
    on both x axes; :meth:`rewind` reports on ``logger`` (None: nowhere)."""

    STATE_FIELDS = {"points": table_of(list_of(count, 2)), "totals": table_of(count)}
    REQUIRED_STATE = ("points", "totals")
    #: the longest time between two fsyncs of the event file in :meth:`flush` (an fsync costs about 5 ms)
    FSYNC_EVERY_S = 30.0

    def __init__(self, logdir: Union[str, os.PathLike], logger: Optional[logging.Logger] = None) -> None:
        super().__init__(logdir)
        self.logger = logger
        self._synced_at = time.monotonic()

    def write_scalars(self, scalars: Mapping[str, ScalarValue], step_iter: int, step_env: int) -> None:
        """``iter`` tag at ``step_iter`` and ``step`` tag at ``step_env`` for every value that is not None."""
        for name, value in scalars.items():
            if value is not None:
                iter_tag, step_tag = tb_tags(name)
                self.add_scalar(iter_tag, value, step_iter)
                self.add_scalar(step_tag, value, step_env)

    def write_video(self, name: str, frames: Sequence[Any], fps: float, step_iter: int, step_env: int) -> None:
        """The episode as an animated GIF image (what ``add_video`` writes, without moviepy) in the Images
        dashboard, on the env-step axis only: ``evaluator/video`` becomes ``evaluator_step/video`` at ``step_env``."""
        from tensorboardX.proto.summary_pb2 import Summary

        from rlearn.video import encode_gif

        gif, height, width = encode_gif(frames, fps)
        tag = tb_tags(name)[1]
        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
        self.add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step_env)
        self.count_point(tag, int(step_env))

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        """A TensorBoard text summary (the TEXT dashboard) at step ``step_iter``."""
        self.add_text(tag, text, step_iter)

    def write_config(self, config: Mapping[str, Any], step_iter: int) -> None:
        """The resolved config as the text summary ``config`` at step ``step_iter``, one key per line as in
        ``<work_dir>/config.py``."""
        from rlearn.config import format_config

        text = format_config(config, comments=False)
        self.add_text("config", "\n".join("    " + line for line in text.splitlines()), step_iter)

    def write_hparams(self, hparams: Mapping[str, Any], metrics: Mapping[str, float], step_iter: int) -> None:
        """An HParams session in the run's own directory, each metric the scalar ``hparams/<name>`` (hparams
        other than bool, number or str: their ``repr``); :meth:`rewind` drops them, the run's end writes them."""
        from tensorboardX.summary import hparams as hparams_summaries

        clean = {name: value if isinstance(value, (bool, int, float, str)) else repr(value)
                 for name, value in hparams.items()}
        tags = {name: f"{HPARAMS_METRIC_PREFIX}{name}" for name in metrics}
        for summary in hparams_summaries(clean, {tags[name]: value for name, value in metrics.items()}):
            self.add_summary(summary, step_iter)
        for name, value in metrics.items():
            self.add_scalar(tags[name], value, step_iter)

    def flush(self, sync: Optional[bool] = None) -> None:
        """Hand the written events to the OS; fsync the event file when ``sync``, or (None) when the last
        fsync is :attr:`FSYNC_EVERY_S` seconds old."""
        if sync is None:
            sync = time.monotonic() - self._synced_at >= self.FSYNC_EVERY_S
        super().flush(sync)
        if sync:
            self._synced_at = time.monotonic()

    def state_dict(self) -> Dict[str, Any]:
        """``{"points": {tag: [last step, points at it]}, "totals": {tag: points}}``, after an fsync."""
        self.flush(sync=True)
        return {"points": {tag: list(entry) for tag, entry in self.points.items()}, "totals": dict(self.totals)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the point counts of a checkpoint."""
        self.require_state(state)
        self.points = {str(tag): [int(v[0]), int(v[1])] for tag, v in state["points"].items()}
        self.totals = {str(tag): int(n) for tag, n in state["totals"].items()}

    def rewind(self, step_iter: int, step_env: int) -> RewindReport:
        """Remove every point written after the checkpoint (:func:`~rlearn.writers.tb_events.rewind_event_files`),
        except in the file open; a WARNING names the points the checkpoint counts that the files no longer hold."""
        for table in (self.points, self.totals):
            for tag in [tag for tag in table if tag.startswith(HPARAMS_METRIC_PREFIX)]:
                del table[tag]
        report = rewind_event_files(
            self.logdir, step_iter, step_env, points=self.points, logger=self.logger,
            skip=(self.event_file,) if self.event_file else (), drop_prefixes=("_hparams_/", HPARAMS_METRIC_PREFIX),
        )
        lost = {tag: n - report.kept.get(tag, 0) for tag, n in self.totals.items() if n > report.kept.get(tag, 0)}
        if lost and self.logger is not None:
            damaged = [f"{path} ({why})" for path, why in report.damaged_tails.items()]
            damaged += [f"{path} ({'; '.join(found)})" for path, found in report.corrupt_records.items()]
            shown = sorted(lost.items(), key=lambda item: (-item[1], item[0]))
            self.logger.warning(
                "TensorBoard: the checkpoint counts %d point(s) of %d tag(s) that the event files in %s no longer "
                "hold; they are lost (damaged: %s): %s%s", sum(lost.values()), len(lost), self.logdir,
                "; ".join(damaged) or "a file removed or replaced", ", ".join(f"{tag} ({n})" for tag, n in shown[:8]),
                f" and {len(shown) - 8} more tag(s)" if len(shown) > 8 else "",
            )
        self.totals = dict(report.kept)
        return report
