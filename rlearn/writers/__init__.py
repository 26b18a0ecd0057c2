"""Writers: where the numbers of the metric path go (the log table, TensorBoard, ...).

``Writer`` is the interface (docs/writers.md); :class:`TableWriter` prints horizontal tables into a
logger, :class:`TensorBoardWriter` writes event files on two x axes (``tb_events`` holds the event-file
machinery it uses: a synchronous writer and the rewind on resume).
"""

from rlearn.writers.base import ScalarValue, Writer
from rlearn.writers.table import TableWriter, column_width, format_value, horizontal_tables
from rlearn.writers.tensorboard import TensorBoardWriter, tb_tags

__all__ = [
    "Writer", "ScalarValue", "TableWriter", "TensorBoardWriter", "tb_tags", "format_value", "horizontal_tables",
    "column_width",
]
