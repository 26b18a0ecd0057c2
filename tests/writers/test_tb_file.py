"""``rlearn.writers.tb_file.TBWriter`` writes what tensorboardX's ``SummaryWriter`` writes, synchronously.

Both files are read back with TensorBoard's own reader; the records are checked with the TFRecord checksum
that TensorBoard's reader checks too (a wrong mask would make it drop every record)."""

from __future__ import annotations

import numpy as np
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboardX import SummaryWriter

from rlearn.writers.tb_events import iter_events, read_records
from rlearn.writers.tb_file import TBWriter, masked_crc32c


def _read(logdir):
    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    texts = {tag: [(e.step, e.tensor_proto.string_val) for e in acc.Tensors(tag)] for tag in acc.Tags()["tensors"]}
    return scalars, texts


def _write_both(writer):
    for step, value in enumerate([0.5, 1, np.float32(2.25), torch.tensor(-3.0), float("nan")]):
        writer.add_scalar("learner_iter/loss_avg", value, step)
    writer.add_scalar("learner_step/loss_avg", 7, 1000)
    writer.add_text("config", "a = 1", 0)


def test_the_same_points_as_summary_writer(tmp_path):
    ours = TBWriter(tmp_path / "ours")
    _write_both(ours)
    ours.close()
    stock = SummaryWriter(str(tmp_path / "stock"))
    _write_both(stock)
    stock.close()
    mine, reference = _read(tmp_path / "ours"), _read(tmp_path / "stock")
    assert mine[1] == reference[1]
    assert mine[0].keys() == reference[0].keys()
    for tag in reference[0]:
        np.testing.assert_array_equal(np.array(mine[0][tag]), np.array(reference[0][tag]))  # NaN == NaN here


def test_a_flushed_point_is_in_the_file_before_close_and_counted(tmp_path):
    writer = TBWriter(tmp_path)
    writer.add_scalar("x", 1.5, 3)
    writer.add_scalar("x", 2.5, 3)
    writer.flush(sync=False)
    events = [e for e in iter_events(writer.event_file) if e.HasField("summary")]
    assert [(e.step, e.summary.value[0].simple_value) for e in events] == [(3, 1.5), (3, 2.5)]
    assert writer.points == {"x": [3, 2]}
    first = writer.event_file
    writer.close()
    assert writer.event_file is None
    writer.add_scalar("x", 4.0, 4)  # a closed writer opens a new file, after the first in name order
    assert writer.event_file != first and sorted([first, writer.event_file])[0] == first
    writer.close()
    assert read_records(first).damaged_tail is None


def test_masked_crc32c_is_the_tfrecord_checksum():
    for data in (b"", b"abc", b"\x00" * 8, bytes(range(256))):
        assert masked_crc32c(data) == _reference_mask(data)
    assert masked_crc32c(b"abc") == 0x21F1576E


def _reference_mask(data: bytes) -> int:
    """crc32c bit by bit (Castagnoli polynomial, reflected), then TensorFlow's mask."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
