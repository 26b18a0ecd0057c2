"""Writers: where the numbers of the metric path go (the log table, TensorBoard, JSON lines, CSV, W&B, MLflow).

``Writer`` is the interface (docs/writers.md); :class:`TableWriter` prints horizontal tables into a
logger, :class:`TensorBoardWriter` writes event files on two x axes (``tb_events`` holds the event-file
machinery it uses: a synchronous writer and the rewind on resume), :class:`JsonlWriter` and
:class:`CsvWriter` append one row per write to ``metrics.jsonl`` / ``metrics.csv``; ``WandbWriter``
(:mod:`rlearn.writers.wandb_writer`; :mod:`rlearn.writers.wandb_log` reads back what W&B really wrote) and
``MlflowWriter`` (:mod:`rlearn.writers.mlflow_writer`) need their optional extras. :func:`build_writers` builds them from ``learner.writers``.
"""

from rlearn.writers.base import ScalarValue, Writer
from rlearn.writers.build import DEFAULT_WRITERS, WRITER_NAMES, build_writer, build_writers
from rlearn.writers.csv_file import CsvWriter, read_csv
from rlearn.writers.jsonl import JsonlWriter, read_jsonl
from rlearn.writers.table import TableWriter, column_width, format_value, horizontal_tables
from rlearn.writers.tensorboard import TensorBoardWriter, tb_tags
from rlearn.writers.tracking import MissingExtraError

__all__ = [
    "Writer", "ScalarValue", "TableWriter", "TensorBoardWriter", "tb_tags", "format_value", "horizontal_tables",
    "column_width", "JsonlWriter", "read_jsonl", "CsvWriter", "read_csv", "build_writer", "build_writers",
    "WRITER_NAMES", "DEFAULT_WRITERS", "MissingExtraError",
]
