"""Videos in TensorBoard: ``encode_gif`` and ``TensorBoardWriter.write_video``, read back with TensorBoard's
EventAccumulator and Pillow; a resumed run drops a video written after its checkpoint."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.video import encode_gif
from rlearn.writers import CsvWriter, JsonlWriter, TableWriter, TensorBoardWriter


def frames(n: int, height: int, width: int) -> list:
    """Frame i is filled with grey level 10 * i, so every frame differs and can be recognised."""
    return [np.full((height, width, 3), 10 * i, dtype=np.uint8) for i in range(n)]


def images(tb_dir) -> dict:
    acc = EventAccumulator(str(tb_dir), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    return {tag: acc.Images(tag) for tag in acc.Tags()["images"]}


def decode(gif: bytes) -> list:
    image = Image.open(io.BytesIO(gif))
    out = []
    for index in range(image.n_frames):
        image.seek(index)
        out.append(np.asarray(image.convert("RGB")))
    return out


@pytest.mark.parametrize("size, shrunk", [((500, 500), (250, 250)), ((400, 600), (134, 200)), ((60, 80), (60, 80))])
def test_encode_gif_keeps_every_frame_and_shrinks_by_a_whole_factor(size, shrunk):
    gif, height, width = encode_gif(frames(5, *size), fps=25)
    assert (height, width) == shrunk
    decoded = decode(gif)
    assert len(decoded) == 5 and decoded[0].shape == (*shrunk, 3)
    assert [int(f[0, 0, 0]) for f in decoded] == [0, 10, 20, 30, 40]
    info = Image.open(io.BytesIO(gif)).info
    assert info["duration"] == 40 and info["loop"] == 0  # 25 fps, loops forever


def test_encode_gif_refuses_what_is_not_a_video():
    with pytest.raises(ValueError, match="no frames"):
        encode_gif([])
    with pytest.raises(ValueError, match="H x W x 3 uint8"):
        encode_gif([np.zeros((4, 4), dtype=np.uint8)])
    with pytest.raises(ValueError, match="max_side"):
        encode_gif(frames(1, 4, 4), max_side=0)


def test_tensorboard_writer_shows_the_video_at_its_env_step(tmp_path):
    writer = TensorBoardWriter(tmp_path / "tb")
    writer.write_scalars({"evaluator/episode_return_mean": -3.0}, 7, 700)
    writer.write_video("evaluator/video", frames(3, 20, 30), 10, 7, 700)
    writer.close()
    got = images(tmp_path / "tb")
    assert list(got) == ["evaluator_step/video"]  # the env-step axis only
    (event,) = got["evaluator_step/video"]
    assert (event.step, event.height, event.width) == (700, 20, 30)
    assert [int(f[0, 0, 0]) for f in decode(event.encoded_image_string)] == [0, 10, 20]
    assert writer.points["evaluator_step/video"] == [700, 1]


def test_other_default_writers_ignore_videos(tmp_path):
    import logging

    for writer in (TableWriter(logging.getLogger("rlearn.test.video")), JsonlWriter(tmp_path / "m.jsonl"),
                   CsvWriter(tmp_path / "m.csv")):
        writer.write_video("evaluator/video", frames(2, 4, 4), 10, 1, 10)
        writer.close()
    assert not (tmp_path / "m.jsonl").exists() and not (tmp_path / "m.csv").exists()


def test_a_resumed_run_drops_a_video_written_after_its_checkpoint(tmp_path):
    writer = TensorBoardWriter(tmp_path / "tb")
    writer.write_video("evaluator/video", frames(2, 8, 8), 10, 5, 50)
    state = writer.state_dict()  # the checkpoint, taken after the first video
    writer.write_video("evaluator/video", frames(2, 8, 8), 10, 5, 50)  # the same envstep again, then later
    writer.write_video("evaluator/video", frames(2, 8, 8), 10, 9, 90)
    writer.close()
    resumed = TensorBoardWriter(tmp_path / "tb")
    resumed.load_state_dict(state)
    report = resumed.rewind(5, 50)
    assert report.points_removed == 2
    assert [e.step for e in images(tmp_path / "tb")["evaluator_step/video"]] == [50]


def test_tensorboard_fsyncs_at_checkpoints_and_close_not_at_every_log(tmp_path, monkeypatch):
    """Every write reaches the OS at once (TensorBoard reads it); the fsync (about 5 ms, most of a log's
    cost) comes at most every FSYNC_EVERY_S, and always when a checkpoint takes the state or at close."""
    import tensorboardX.record_writer as record_writer

    synced = []
    monkeypatch.setattr(record_writer.os, "fsync", lambda fd: synced.append(fd))
    writer = TensorBoardWriter(tmp_path / "tb")
    for step in range(1, 5):
        writer.write_scalars({"loss_avg": float(step)}, step, 10 * step)
        writer.flush()
    assert synced == []
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("learner_iter/loss_avg")] == [1, 2, 3, 4]  # on the OS's side already
    assert writer.state_dict()["points"]["learner_iter/loss_avg"] == [4, 1] and len(synced) == 1
    writer.FSYNC_EVERY_S = 0.0
    writer.write_scalars({"loss_avg": 5.0}, 5, 50)
    writer.flush()
    assert len(synced) == 2
    writer.FSYNC_EVERY_S = 30.0
    writer.write_scalars({"loss_avg": 6.0}, 6, 60)
    writer.flush()
    assert len(synced) == 2
    writer.close()  # the last point: fsynced once (nothing is fsynced twice)
    assert len(synced) == 3


def gif_delays(gif: bytes) -> list:
    """Each frame's delay as stored, in hundredths of a second (Pillow reports it in milliseconds)."""
    image = Image.open(io.BytesIO(gif))
    delays = []
    for index in range(image.n_frames):
        image.seek(index)
        delays.append(image.info["duration"] // 10)
    return delays


@pytest.mark.parametrize("fps, frame_count, kept_every", [(30, 90, 1), (125, 250, 3), (25, 50, 1), (60, 120, 2), (50, 100, 1)])
def test_gif_plays_at_the_video_speed(fps, frame_count, kept_every):
    """GIF stores delays in hundredths of a second: a 30 fps video used to get 3 (playing at 33 fps) and a
    125 fps MuJoCo video 0 (which browsers play as 10: 12.5 times too slow)."""
    rng = np.random.default_rng(0)
    video = [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(frame_count)]  # no two alike
    gif, _, _ = encode_gif(video, fps=fps)
    delays = gif_delays(gif)
    assert len(delays) == len(range(0, frame_count, kept_every))
    # the video's length to the hundredth (the last frame may be held for the shortest delay browsers honour)
    assert round(100 * frame_count / fps) <= sum(delays) <= round(100 * frame_count / fps) + 1
    assert min(delays) >= 2  # browsers play shorter delays as 10
    assert max(delays) - min(delays) <= 1


def test_gif_refuses_a_bad_frame_rate():
    with pytest.raises(ValueError, match="fps must be a positive number, got 0"):
        encode_gif(frames(2, 4, 4), fps=0)
