"""Building the writers a config names: ``learner.writers = ["table", "tensorboard", dict(type="wandb", ...)]``;
the file writers (``tensorboard``, ``jsonl``, ``csv``) are left out when the learner has no work dir."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from rlearn.config.writer_specs import DEFAULT_WRITERS, WRITER_NAMES, check_writer_specs
from rlearn.writers.base import Writer
from rlearn.writers.csv_file import CsvWriter
from rlearn.writers.jsonl import JsonlWriter
from rlearn.writers.mlflow_writer import MlflowWriter
from rlearn.writers.table import TableWriter
from rlearn.writers.tensorboard import TensorBoardWriter
from rlearn.writers.wandb_writer import WandbWriter

__all__ = ["WRITER_NAMES", "DEFAULT_WRITERS", "build_writer", "build_writers", "check_writer_specs"]

#: per name: ``(work_dir, logger, **options) -> writer``; the file writers' work dir is never None
_FACTORIES: Dict[str, Callable[..., Writer]] = {
    "table": lambda work_dir, logger, **options: TableWriter(logger, **options),
    "tensorboard": lambda work_dir, logger, **options: TensorBoardWriter(work_dir / "tb", logger=logger, **options),
    "jsonl": lambda work_dir, logger, **options: JsonlWriter(work_dir / "metrics.jsonl", logger=logger, **options),
    "csv": lambda work_dir, logger, **options: CsvWriter(work_dir / "metrics.csv", logger=logger, **options),
    "wandb": WandbWriter,
    "mlflow": MlflowWriter,
}


def build_writer(spec: Union[str, Mapping[str, Any]], work_dir: Union[str, Path, None],
                 logger: logging.Logger) -> Optional[Writer]:
    """One writer from a name or ``dict(type=NAME, **options)``; None for a file writer without a work dir.
    ValueError for an unknown name, TypeError for options the writer does not take, naming them."""
    options = dict(spec) if isinstance(spec, Mapping) else {"type": spec}
    name = options.pop("type", None)
    if check_writer_specs([name]) is not None:
        raise ValueError(f"learner.writers: {spec!r} is not a writer: use one of {', '.join(WRITER_NAMES)}")
    if work_dir is None and name in ("tensorboard", "jsonl", "csv"):
        return None
    try:
        return _FACTORIES[name](Path(work_dir) if work_dir is not None else None, logger, **options)
    except TypeError as exc:
        raise TypeError(f"learner.writers: bad options for the {name!r} writer {options}: {exc}") from exc


def build_writers(specs: Sequence[Union[str, Mapping[str, Any]]], work_dir: Union[str, Path, None],
                  logger: logging.Logger) -> List[Writer]:
    """The writers of ``specs`` in order (see :func:`build_writer`)."""
    return [writer for spec in specs if (writer := build_writer(spec, work_dir, logger)) is not None]
