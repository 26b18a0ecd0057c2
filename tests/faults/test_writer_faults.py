"""Faults where the writers and the commands that read their files meet damaged files, bad paths and odd
data: a damaged line in ``metrics.jsonl`` (the writer goes on, ``rlearn plot`` reads around it), ``rlearn
plot`` on a one-point series, with labels that used to be cut to the same text and an unwritable ``-o``,
``rlearn trace`` on garbage. The commands run as subprocesses, as a user runs them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlearn.commands.plot import Curve, draw_curves, group_runs, load_run
from rlearn.config import dump_config
from rlearn.writers import CsvWriter, JsonlWriter, read_csv, read_jsonl

ROOT = Path(__file__).resolve().parents[2]


def rlearn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlearn", *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def write_rows(writer, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        writer.write_scalars({"loss_avg": float(i) / 4, "evaluator/episode_return_mean": -float(i)}, i, 10 * i)
        writer.flush()


def damage_line(path: Path, number: int, garbage: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[number - 1] = garbage + "\n"
    path.write_text("".join(lines))


# ------------------------------------------------------------------------------ damaged metrics.jsonl
@pytest.mark.parametrize("writer_class, name, line", [(JsonlWriter, "metrics.jsonl", 3), (CsvWriter, "metrics.csv", 4)])
def test_a_damaged_row_is_skipped_with_a_warning_and_the_resumed_writer_goes_on(tmp_path, caplog, writer_class, name, line):
    """Before: one damaged line made ``rewind`` raise, which switched the writer off for the whole resumed run
    (rc 0). Now the line is dropped with a warning naming file and line, and every other row stays."""
    path = tmp_path / name
    logger = logging.getLogger("rlearn.test.rows")
    first = writer_class(path, logger=logger)
    write_rows(first, 5)  # iterations 0..4
    checkpoint = first.state_dict()
    write_rows(first, 2, start=5)  # after the checkpoint; then the process dies
    first.close()
    damage_line(path, line, '{"train_iter": 2, "envst\x00\x17 garbage, "x')  # the row of iteration 2 rots

    resumed = writer_class(path, logger=logger)
    resumed.load_state_dict(checkpoint)
    with caplog.at_level(logging.WARNING, logger="rlearn.test.rows"):
        resumed.rewind(4, 40)
    write_rows(resumed, 3, start=5)
    resumed.close()
    rows = read_jsonl(path) if name.endswith(".jsonl") else [{k: float(v) for k, v in r.items()} for r in read_csv(path)]
    assert [int(r["train_iter"]) for r in rows] == [0, 1, 3, 4, 5, 6, 7]
    assert [r["loss_avg"] for r in rows] == [i / 4 for i in (0, 1, 3, 4, 5, 6, 7)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}:{line}: damaged row skipped (")


def test_plot_reads_around_a_damaged_line_and_names_it(tmp_path):
    """Before: ``rlearn plot`` crashed with a JSONDecodeError traceback on the file."""
    work = tmp_path / "run"
    write_rows(JsonlWriter(work / "metrics.jsonl"), 4)
    damage_line(work / "metrics.jsonl", 2, "\x00\x00\x00{garbage")
    out = rlearn("plot", str(work), "-o", str(tmp_path / "c.png"))
    assert out.returncode == 0, out.stderr
    assert f"rlearn plot: warning: {work / 'metrics.jsonl'}:2: damaged row skipped (not JSON: " in out.stderr
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["train_iter"] for r in load_run(work).rows] == [0, 2, 3]


def test_plot_never_executes_config_py(tmp_path):
    """``config.py`` is read as the literal rlearn writes; code in it does not run (opening a work dir someone
    sent runs none of their code), it only loses the grouping."""
    work = tmp_path / "run"
    write_rows(JsonlWriter(work / "metrics.jsonl"), 2)
    marker = tmp_path / "ran"
    (work / "config.py").write_text(f"open({str(marker)!r}, 'w').close()\nconfig = dict(exp_name='x')\n")
    out = rlearn("plot", str(work), "-o", str(tmp_path / "c.png"))
    assert out.returncode == 0, out.stderr
    assert not marker.exists()
    assert "is not a config rlearn wrote" in out.stderr
    dump_config({"exp_name": "td3", "seed": 1, "train": {"max_env_steps": float("inf")}}, work / "config.py")
    assert load_run(work).config == {"exp_name": "td3", "seed": 1, "train": {"max_env_steps": float("inf")}}


# ------------------------------------------------------------------------------------------- plot edges
def colour_pixels_outside_legend(fig, colour: str) -> int:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[:, :, :3].astype(int)
    target = np.array([round(255 * c) for c in to_rgb(colour)])
    hits = np.all(np.abs(pixels - target) <= 8, axis=2)
    box = fig.axes[0].get_legend().get_window_extent()
    height = pixels.shape[0]
    hits[int(height - box.y1) - 2 : int(height - box.y0) + 2, int(box.x0) - 2 : int(box.x1) + 2] = False
    return int(hits.sum())


def test_plot_draws_a_series_of_one_point():
    """Before: a line through one point has no length: nothing was drawn, exit 0."""
    one = Curve("one evaluation", [100.0], [-3.0], [-3.0], [-3.0], [1], ["run"])
    fig = draw_curves([one], "evaluator/episode_return_mean", "envstep")
    assert colour_pixels_outside_legend(fig, fig.axes[0].lines[0].get_color()) >= 20


def test_plot_labels_are_never_cut_to_the_same_text_and_writers_or_videos_are_no_difference(tmp_path):
    """Before: labels were cut at 70 characters with "...", so two groups could read the same; and runs that
    differed only in their writer list or video settings were drawn as different experiments."""
    long_value = "a_rather_long_keyword_argument_value_for_the_environment_of_this_test"
    runs = []
    for i, (writers, video) in enumerate([(["table"], False), (["table", "csv"], True)]):
        config = {"exp_name": "e", "seed": i, "env": {"id": "Pendulum-v1"}, "learner": {"writers": writers},
                  "eval": {"video": video, "video_freq": 10 * i or None},
                  "policy": {"hidden": [256, 256], "lr": 0.001, "note": f"{long_value}_{i}"}}
        work = tmp_path / f"r{i}"
        write_rows(JsonlWriter(work / "metrics.jsonl"), 1)
        dump_config(config, work / "config.py")
        runs.append(load_run(work))
    labels = [label for label, _ in group_runs(runs)]
    assert labels == [f"policy.note={long_value}_0", f"policy.note={long_value}_1"]
    runs[1].config["policy"]["note"] = runs[0].config["policy"]["note"]
    assert [len(members) for _, members in group_runs(runs)] == [2]  # writers and videos: one experiment
    runs[1].config["policy"].update(lr=0.01, note="other")
    labels = [label for label, _ in group_runs(runs)]
    assert labels[1] == "policy.lr=0.01, policy.note=other"
    assert labels[0] == f"policy.lr=0.001,\npolicy.note={long_value}_0"  # wrapped, not cut


@pytest.mark.parametrize("where", ["a file as the folder", "a read-only folder"])
def test_plot_to_an_unwritable_path_is_one_line(tmp_path, where):
    """Before: a traceback (FileExistsError / PermissionError from matplotlib)."""
    work = tmp_path / "run"
    write_rows(JsonlWriter(work / "metrics.jsonl"), 3)
    if where == "a file as the folder":
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "curves.png"
    else:
        target = Path("/proc/curves.png")  # refused even to root
    out = rlearn("plot", str(work), "-o", str(target))
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rlearn plot: error: cannot write {target}: "), out.stderr


# ----------------------------------------------------------------------------------------------- trace
@pytest.mark.parametrize("content", [b"\x89PNG garbage \x00\x01 not records at all", b"", b"{}\n"])
def test_trace_on_garbage_is_an_error(tmp_path, content):
    """Before: rc 0 and "wrote trace.json: 0 spans" for a rank file of garbage."""
    (tmp_path / "trace").mkdir()
    (tmp_path / "trace" / "rank0.jsonl").write_bytes(content)
    out = rlearn("trace", str(tmp_path), "-o", str(tmp_path / "t.json"))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("rlearn trace: error: "), out.stderr
    assert str(tmp_path / "trace" / "rank0.jsonl") in out.stderr
    assert not (tmp_path / "t.json").exists()


# ---------------------------------------------------------------------------------- TensorBoard garbage
def test_an_event_file_overwritten_with_garbage_is_a_warning_naming_what_was_lost(tmp_path, caplog):
    """Before: the file was cut to 0 bytes and the only notice was an INFO line about a damaged tail, though
    the checkpoint knew it held 361 points."""
    from rlearn.writers import TensorBoardWriter

    logger = logging.getLogger("rlearn.test.tb")
    writer = TensorBoardWriter(tmp_path / "tb", logger=logger)
    for i in range(1, 121):
        writer.write_scalars({"loss_avg": i / 8, "collector/episode_return_avg": -i / 2}, i, 8 * i)  # 4 points
        if i % 40 == 0:
            writer.write_scalars({"evaluator/episode_return_mean": -float(i)}, i, 8 * i)  # 2 points
    writer.write_scalars({"q_avg": 0.5}, 120, 960)
    checkpoint = writer.state_dict()
    writer.close()
    assert sum(checkpoint["totals"].values()) == 4 * 120 + 2 * 3 + 2
    (path,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    path.write_bytes(np.random.default_rng(0).integers(0, 256, path.stat().st_size, dtype=np.uint8).tobytes())

    resumed = TensorBoardWriter(tmp_path / "tb", logger=logger)
    resumed.load_state_dict(checkpoint)
    with caplog.at_level(logging.INFO, logger="rlearn.test.tb"):
        resumed.rewind(120, 960)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"TensorBoard: the checkpoint counts 488 point(s) of 8 tag(s) that the event files "
                              f"in {tmp_path / 'tb'} no longer hold; they are lost (damaged: {path} (")
    assert "learner_iter/loss_avg (120)" in warning and "learner_iter/q_avg (1)" in warning

    caplog.clear()  # a torn tail that loses nothing the checkpoint counts stays an INFO line
    writer = TensorBoardWriter(tmp_path / "tb2", logger=logger)
    writer.write_scalars({"loss_avg": 1.0}, 1, 8)
    checkpoint = writer.state_dict()
    writer.write_scalars({"loss_avg": 2.0}, 2, 16)
    writer.close()
    (path,) = (tmp_path / "tb2").glob("events.out.tfevents.*")
    path.write_bytes(path.read_bytes()[:-5])
    resumed = TensorBoardWriter(tmp_path / "tb2", logger=logger)
    resumed.load_state_dict(checkpoint)
    with caplog.at_level(logging.INFO, logger="rlearn.test.tb"):
        resumed.rewind(1, 8)
    assert [r.levelno for r in caplog.records] == [logging.INFO]


# ------------------------------------------------------------------------------------ evaluation on resume
def test_an_evaluation_due_at_the_checkpoint_happens_at_the_same_env_step_after_a_resume(tmp_path):
    """Before: a checkpoint taken after a collection's iterations, just before its evaluation, resumed with the
    evaluation one collection later (envstep 24 instead of 16 here; 8448 instead of 8192 in a longer run), so
    the rewound TensorBoard / metrics.jsonl and W&B / MLflow (which keep the first process's rows) disagreed."""
    from rlearn.config import load_config
    from rlearn.run import train

    def cfg():  # 8 env steps per collection, 8 iterations each from envstep 16; checkpoint at iteration 8
        return load_config("td3_pendulum", [
            "policy.hidden_sizes=[8]", "policy.batch_size=4", "policy.learning_starts=8", "policy.learn_threads=1",
            "env.kwargs.max_episode_steps=20", "train.max_env_steps=48", "train.collect_steps=8",
            "learner.log_freq=4", "eval.freq=16", "eval.episodes=1", "checkpoint.freq=8", "checkpoint.keep=none",
            "buffer.size=100", 'learner.writers=["table","jsonl"]'])

    def evaluations(work):
        return [(r["train_iter"], r["envstep"]) for r in read_jsonl(work / "metrics.jsonl")
                if "evaluator/episode_return_mean" in r]

    train(cfg(), work_dir=tmp_path / "straight")
    expected = evaluations(tmp_path / "straight")
    assert expected == [(8, 16), (24, 32), (40, 48)]
    crashed = tmp_path / "crashed"
    train(cfg(), work_dir=crashed)
    train(cfg(), work_dir=crashed, resume=crashed / "ckpt" / "iteration_8.pt")  # saved at envstep 16, before its evaluation
    assert evaluations(crashed) == expected
