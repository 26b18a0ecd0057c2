"""``WandbWriter``: Weights & Biases (``pip install 'rlearn[wandb]'``).

Every write is one ``run.log(row)`` whose row holds ``train_iter``, ``envstep`` and every value that is not
None under its final name (``loss_avg``, ``evaluator/episode_return_mean``). Both axes are explicit:
``envstep`` and ``train_iter`` are declared with ``define_metric`` and every other metric uses ``envstep`` as
its step metric (``define_metric("*", step_metric="envstep")``); W&B's own implicit ``_step`` is never
used as an axis (it restarts in each offline session). Switch a chart's x-axis to ``train_iter`` in the UI.
The resolved config is the run's config. On resume the same run continues (run id in the checkpoint and in
``<work_dir>/wandb_run.json``; see :mod:`rlearn.writers.tracking`).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from rlearn.writers.tracking import TrackingWriter, require

__all__ = ["WandbWriter"]


class WandbWriter(TrackingWriter):
    """Logs to a W&B run (see the module doc).

    Args:
        work_dir: the run's work dir: W&B's files go to ``<work_dir>/wandb/`` unless ``dir`` or the
            ``WANDB_DIR`` environment variable says otherwise; ``wandb_run.json`` is kept there.
        project, entity, name, group, tags: as in ``wandb.init`` (``name`` defaults to the work dir's name).
        mode: ``"online"``, ``"offline"`` (sync later with ``wandb sync``) or ``"disabled"``; None: W&B's
            default (``WANDB_MODE``, else online).
        dir: where W&B keeps its files.
        init_kwargs: any other ``wandb.init`` argument.
    """

    kind = "wandb"

    def __init__(self, work_dir: Union[str, os.PathLike, None] = None, logger: Any = None, project: str = "rlearn",
                 entity: Optional[str] = None, name: Optional[str] = None, group: Optional[str] = None,
                 tags: Optional[Sequence[str]] = None, mode: Optional[str] = None, dir: Optional[str] = None,
                 **init_kwargs: Any) -> None:
        super().__init__(work_dir, logger)
        require("wandb", "wandb")  # fail when the run is built, not at its first log
        self.project, self.entity, self.group, self.mode = project, entity, group, mode
        self.run_name = name if name is not None else (self.work_dir.name if self.work_dir is not None else None)
        self.tags = list(tags) if tags else None
        self.dir = dir
        self.init_kwargs = init_kwargs
        self.run: Any = None

    def _start(self, run_id: Optional[str], config: Optional[Mapping[str, Any]]) -> str:
        wandb = require("wandb", "wandb")
        # read WANDB_DIR at each start: wandb reads it once per process
        directory = self.dir or os.environ.get("WANDB_DIR") or (str(self.work_dir) if self.work_dir else None)
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
        self.run = wandb.init(
            project=self.project, entity=self.entity, name=self.run_name, group=self.group, tags=self.tags,
            mode=self.mode, dir=directory, id=run_id, resume="allow" if run_id else None,
            config=dict(config) if config is not None else None, reinit="create_new", **self.init_kwargs,
        )
        self.run.define_metric("envstep")
        self.run.define_metric("train_iter")
        self.run.define_metric("*", step_metric="envstep")
        return str(self.run.id)

    def _log_row(self, row: Dict[str, Union[int, float]], step_iter: int, step_env: int) -> None:
        self.run.log({"train_iter": step_iter, "envstep": step_env, **row})

    def _log_config(self, config: Mapping[str, Any]) -> None:
        self.run.config.update(dict(config), allow_val_change=True)

    def _finish(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
