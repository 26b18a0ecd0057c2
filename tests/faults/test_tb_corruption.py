"""Fault: one damaged record in the middle of a TensorBoard event file at resume (item 10).

Before: the rewind read records up to the first bad checksum, took it for the end of the file and
rewrote the file without everything after it: one flipped bit deleted every later point. Now the damaged
record is skipped (counted in the report and warned about on the logger) and the valid records after it
are kept. Read back with TensorBoard's own EventAccumulator.
"""

from __future__ import annotations

import logging
import struct

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.writers.tb_events import TBWriter, event_files, read_records, rewind_event_files


def scalars(logdir):
    acc = EventAccumulator(str(logdir), purge_orphaned_data=False, size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def write_run(logdir, steps=range(1, 21)):
    points = {}
    writer = TBWriter(logdir, points=points)
    for step in steps:
        writer.add_scalar("learner_iter/loss_avg", float(step), step)
    writer.close()
    (path,) = event_files(logdir)
    return path, points


def record_offsets(path):
    """Start offset of each record (first: the file-version event)."""
    blob, offsets, offset = path.read_bytes(), [], 0
    while offset < len(blob):
        (length,) = struct.unpack_from("<Q", blob, offset)
        offsets.append(offset)
        offset += 8 + 4 + length + 4
    return offsets


def corrupt(path, record, where, offsets=None):
    """Flip a bit in record ``record``: in its data (its length stays readable) or in its length."""
    blob = bytearray(path.read_bytes())
    start = (offsets or record_offsets(path))[record]
    blob[start + (12 + 3 if where == "data" else 2)] ^= 0x04
    path.write_bytes(bytes(blob))
    return start


@pytest.mark.parametrize("where, problem", [("data", "bad data checksum"), ("length", "bad length checksum")])
def test_one_bad_record_mid_file_is_skipped_and_the_rest_kept(tmp_path, caplog, where, problem):
    path, points = write_run(tmp_path)
    offset = corrupt(path, 8, where)  # record 8 holds the point at step 8
    content = read_records(path)
    assert content.damaged_tail is None
    assert len(content.corrupt) == 1 and content.corrupt[0].startswith(f"{problem} at byte {offset} (")
    assert len(content.records) == 20  # 21 records (file version + 20 points), one skipped

    logger = logging.getLogger("rlearn.test.tb")
    with caplog.at_level(logging.WARNING, logger="rlearn.test.tb"):
        report = rewind_event_files(tmp_path, train_iter=15, envstep=0, points={"learner_iter/loss_avg": [15, 1]}, logger=logger)
    assert report.corrupt_count == 1 and report.corrupt_records[path] == content.corrupt
    assert report.points_removed == 5 and report.files_rewritten == [path] and report.damaged_tails == {}
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"TensorBoard rewind: {path} had 1 damaged record(s) in the middle ({problem} at byte {offset}")
    assert warning.endswith("dropped them (the points they held are lost) and kept the valid records after them")
    # the points after the damaged one survive; only the damaged point and those after the checkpoint go
    assert scalars(tmp_path)["learner_iter/loss_avg"] == [(s, float(s)) for s in range(1, 16) if s != 8]
    assert read_records(path).corrupt == []  # the file is whole again


def test_rewind_repairs_a_file_with_nothing_to_remove(tmp_path):
    path, _ = write_run(tmp_path, steps=range(1, 6))
    corrupt(path, 2, "data")
    # TensorBoard itself stops at the damaged record: the points after it are invisible
    assert [s for s, _ in scalars(tmp_path)["learner_iter/loss_avg"]] == [1]
    report = rewind_event_files(tmp_path, train_iter=100, envstep=0)
    assert report.points_removed == 0 and report.corrupt_count == 1 and report.files_rewritten == [path]
    assert [s for s, _ in scalars(tmp_path)["learner_iter/loss_avg"]] == [1, 3, 4, 5]


def test_damage_at_the_end_is_still_a_damaged_tail(tmp_path):
    path, _ = write_run(tmp_path, steps=range(1, 6))
    last = record_offsets(path)[-1]
    corrupt(path, 5, "data")
    content = read_records(path)
    assert content.corrupt == [] and content.damaged_tail == f"bad data checksum at byte {last}"
    report = rewind_event_files(tmp_path, train_iter=100, envstep=0)
    assert report.damaged_tails == {path: f"bad data checksum at byte {last}"} and report.corrupt_count == 0
    assert [s for s, _ in scalars(tmp_path)["learner_iter/loss_avg"]] == [1, 2, 3, 4]


def test_two_damaged_regions_and_a_torn_tail(tmp_path):
    path, _ = write_run(tmp_path, steps=range(1, 11))
    offsets = record_offsets(path)
    corrupt(path, 3, "length", offsets)
    corrupt(path, 7, "data", offsets)
    with open(path, "ab") as handle:  # and a crash mid-write
        handle.write(struct.pack("<Q", 40) + b"\x00\x01")
    content = read_records(path)
    assert len(content.corrupt) == 2 and content.damaged_tail.startswith("truncated record header")
    rewind_event_files(tmp_path, train_iter=100, envstep=0)
    assert [s for s, _ in scalars(tmp_path)["learner_iter/loss_avg"]] == [1, 2, 4, 5, 6, 8, 9, 10]
