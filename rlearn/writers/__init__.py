"""Writers: where the numbers of the metric path go (the log table, TensorBoard, JSON lines, CSV, W&B, MLflow).

``WandbWriter`` and ``MlflowWriter`` (in their own modules) need their optional extras. See docs/writers.md.
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
