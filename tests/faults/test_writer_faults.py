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


def test_plot_to_an_unwritable_path_is_one_line(tmp_path, capsys):
    """Before: a traceback (FileExistsError / PermissionError from matplotlib)."""
    from rlearn.cli import main

    work = tmp_path / "run"
    write_rows(JsonlWriter(work / "metrics.jsonl"), 3)
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / "curves.png"  # below a file
    out = rlearn("plot", str(work), "-o", str(target))  # as a user runs it
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr == f"rlearn plot: error: cannot write {target}: Not a directory (ENOTDIR); nothing was written\n"
    target = Path("/proc/curves.png")  # a folder nobody may write to, root included
    assert main(["plot", str(work), "-o", str(target)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rlearn plot: error: cannot write {target}: "), lines


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


# ---------------------------------------------------------------------------------------------- W&B
WANDB_CHILD = """
import json, os, sys
from rlearn.writers.wandb_writer import WandbWriter
work, checkpoint_at, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
writer = WandbWriter(work, mode="offline", project="rlearn-test")
for i in range(kill_at + 1):
    writer.write_scalars({"loss_avg": i / 4}, 4 * i, 32 * i)
    if i % 5 == 4:
        writer.write_scalars({"evaluator/episode_return_mean": -float(i)}, 4 * i, 32 * i)  # same position, k = 1
    writer.flush()
    if i == checkpoint_at:
        with open(os.path.join(work, "checkpoint.json"), "w") as f:
            json.dump(writer.state_dict(), f)
print("logged", flush=True)
os.kill(os.getpid(), 9)
"""


def expected_wandb_rows(last: int) -> list:
    rows = []
    for i in range(last + 1):
        rows.append({"train_iter": 4 * i, "envstep": 32 * i, "loss_avg": i / 4})
        if i % 5 == 4:
            rows.append({"train_iter": 4 * i, "envstep": 32 * i, "evaluator/episode_return_mean": -float(i)})
    return rows


@pytest.fixture
def wandb_dir(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_files"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    return tmp_path / "wandb_files"


def test_wandb_keeps_every_row_exactly_once_through_kill_9_and_resume(tmp_path, wandb_dir):
    """Before: ``wandb_run.json`` recorded the last row handed to ``run.log``, but W&B's service writes its
    transaction log in 32 KiB blocks: after a ``kill -9`` the log lacked rows the state claimed, and the
    resumed run skipped them for good. Now the state records only rows read back from the log, the checkpoint
    keeps the rows W&B has not written yet, and a resume logs what the logs lack (W&B's own reader checks)."""
    sys.path.insert(0, str(ROOT / "tests" / "writers"))
    from tracking_readers import wandb_records

    from rlearn.writers.wandb_writer import WandbWriter

    checkpoint_at, kill_at = 9, 300  # W&B wrote some blocks (rows past the checkpoint) and holds back the last
    work = tmp_path / "work"
    work.mkdir()
    child = subprocess.run([sys.executable, "-c", WANDB_CHILD, str(work), str(checkpoint_at), str(kill_at)],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert child.returncode == -9 and child.stdout == "logged\n", child.stderr[-2000:]
    state = json.loads((work / "checkpoint.json").read_text())
    resumed = WandbWriter(work, mode="offline", project="rlearn-test")
    resumed.load_state_dict(state)
    resumed.rewind(4 * checkpoint_at, 32 * checkpoint_at)
    held = resumed._logged  # the last row W&B's logs hold: past the checkpoint, short of the kill
    assert (4 * checkpoint_at, 32 * checkpoint_at, 1) < held < (4 * kill_at, 32 * kill_at, 0)
    last = kill_at + 5
    for row in expected_wandb_rows(last):  # the resumed run computes the rows after the checkpoint again
        if row["train_iter"] > 4 * checkpoint_at:
            resumed.write_scalars({k: v for k, v in row.items() if k not in ("train_iter", "envstep")},
                                  row["train_iter"], row["envstep"])
            resumed.flush()
    resumed.close()
    rows, _, _ = wandb_records(wandb_dir, resumed.run_id)
    assert rows == expected_wandb_rows(last)
    assert json.loads((work / "wandb_run.json").read_text())["logged"] == [4 * last, 32 * last, 0]


class FillDisk:
    """A hook that fills the file system of ``path`` at iteration ``at`` (leaves 1 KiB), or only makes the
    W&B writer see it full where no tmpfs can be mounted."""

    def __init__(self, path, at, monkeypatch=None):
        self.path, self.at, self.monkeypatch = Path(path), at, monkeypatch

    def after_iter(self, learner):
        if learner.train_iter != self.at:
            return
        if self.monkeypatch is not None:
            import collections

            from rlearn.writers import wandb_writer

            usage = collections.namedtuple("usage", "total used free")
            self.monkeypatch.setattr(wandb_writer.shutil, "disk_usage", lambda path: usage(1 << 30, 1 << 30, 1024))
            return
        import os

        fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: the disk is full
            pass
        finally:
            os.close(fd)


@pytest.mark.parametrize("disk", ["tmpfs", "simulated"])
def test_wandb_on_a_full_disk_is_reported_once_switched_off_and_in_the_summary(tmp_path, monkeypatch, disk):
    """Before: W&B's service failed to write its blocks without telling anyone: rc 0, no message, rows missing."""
    pytest.importorskip("wandb")
    from rlearn.config import load_config
    from rlearn.hooks import Hook
    from rlearn.run import Trainer

    files = tmp_path / "wandb_files"
    files.mkdir()
    if disk == "tmpfs":
        if sys.platform != "linux" or __import__("os").geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root on Linux")
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(files)]).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
    try:
        monkeypatch.setenv("WANDB_DIR", str(files))
        monkeypatch.setenv("WANDB_SILENT", "true")
        cfg = load_config("td3_pendulum", [
            "policy.hidden_sizes=[8]", "policy.batch_size=4", "policy.learning_starts=8", "policy.learn_threads=1",
            "env.kwargs.max_episode_steps=20", "train.max_env_steps=60", "learner.log_freq=5", "eval.freq=30",
            "eval.episodes=1", "checkpoint.freq=25", "buffer.size=100",
            'learner.writers=["table","jsonl",{"type":"wandb","mode":"offline","project":"t"}]'])
        trainer = Trainer(cfg, work_dir=tmp_path / "run")
        hook = type("FillDiskHook", (FillDisk, Hook), {})(files, 20, monkeypatch if disk == "simulated" else None)
        trainer.learner.register_hook(hook)
        result = trainer.run()
    finally:
        if disk == "tmpfs":
            import wandb

            wandb.teardown()  # W&B's service process holds files there
            subprocess.run(["umount", "--lazy", str(files)], check=True)
    log = (tmp_path / "run" / "td3_pendulum.log").read_text()
    errors = [line for line in log.splitlines() if " - ERROR - " in line]
    assert len(errors) == 1, errors
    assert "writer WandbWriter failed in flush (OSError: [Errno 28] No space left on device: " in errors[0]
    assert "it is disabled for the rest of this run" in errors[0]
    assert list(result.failed_writers) == ["WandbWriter"]
    assert "  writer off:  WandbWriter could not write (OSError: [Errno 28] No space left on device" in log
    assert [r["train_iter"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl")][-1] == result.train_iter


def test_mlflow_logs_no_metric_twice_after_a_kill_inside_a_batch(tmp_path, monkeypatch):
    """A kill while one row's batch is being stored leaves part of the row in MLflow and none of it in
    ``mlflow_run.json``: the resumed run used to log those metrics a second time."""
    pytest.importorskip("mlflow")
    sys.path.insert(0, str(ROOT / "tests" / "writers"))
    from mlflow.entities import Metric
    from tracking_readers import mlflow_history

    from rlearn.writers.mlflow_writer import MlflowWriter

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    first = MlflowWriter(tmp_path / "work", tracking_uri=uri, experiment_name="rl")
    first.write_scalars({"a": 1.0, "b": 2.0}, 10, 70)
    first.flush()
    checkpoint = first.state_dict()
    # killed while storing the row of iteration 20: its first two metrics reached MLflow, the state file did not
    first.client.log_batch(first.run_id, metrics=[Metric("envstep", 140.0, 0, 20), Metric("a", 3.0, 0, 20)])
    resumed = MlflowWriter(tmp_path / "work", tracking_uri=uri, experiment_name="rl")
    resumed.load_state_dict(checkpoint)
    resumed.rewind(10, 70)
    resumed.write_scalars({"a": 3.0, "b": 4.0}, 20, 140)
    resumed.write_scalars({"a": 5.0, "b": 6.0}, 30, 210)
    resumed.close()
    history, _, _ = mlflow_history(uri, first.run_id)
    assert history == {"envstep": [(10, 70.0), (20, 140.0), (30, 210.0)], "a": [(10, 1.0), (20, 3.0), (30, 5.0)],
                       "b": [(10, 2.0), (20, 4.0), (30, 6.0)]}


def test_an_mlflow_server_that_is_down_is_reported_at_start_up_and_the_run_goes_on(tmp_path):
    """Before: MLflow retried the refused connection for about 4 minutes without a word, then the writer went off."""
    pytest.importorskip("mlflow")
    import socket

    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{sock.getsockname()[1]}"
    work = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "rlearn", "train", str(ROOT / "examples" / "custom_policy.py"), "--work-dir", str(work),
         "--set", "env.num_envs=2", "policy.rollout_steps=16", "train.max_env_steps=64", "eval.freq=none",
         f'learner.writers=["table","jsonl",{{"type":"mlflow","tracking_uri":"{uri}"}}]'],
        capture_output=True, text=True, cwd=ROOT, timeout=150)  # MLflow's own retries took ~245 s
    assert done.returncode == 0, done.stderr[-2000:]
    log = (work / "reinforce_cartpole.log").read_text().splitlines()
    errors = [n for n, line in enumerate(log) if " - ERROR - " in line]
    assert len(errors) == 1 and (f"writer MlflowWriter failed in write_config (OSError: MLflow tracking server {uri} "
                                 "cannot be reached (connection refused)") in log[errors[0]]
    assert not log[errors[0] + 1].startswith(("Traceback", " "))  # one line: the error says it all, no traceback
    starting = next(n for n, line in enumerate(log) if "starting, work dir" in line)
    assert errors[0] < starting  # at start-up, before the first iteration
    assert {row["train_iter"] for row in read_jsonl(work / "metrics.jsonl")} == {2}  # training went on
    assert any("writer off:  MlflowWriter could not write (OSError: MLflow tracking server" in line for line in log)


@pytest.mark.parametrize("option, message", [
    ('"mode":"offlinee"', "rlearn train: error: learner: WandbWriter option mode='offlinee' is refused by W&B: "),
    pytest.param('"projet":"x"', "rlearn train: error: learner: learner.writers: bad options for the 'wandb' "
                 "writer {'projet': 'x'}: WandbWriter got an unknown option 'projet'", marks=pytest.mark.slow),
])
def test_a_bad_wandb_option_is_a_config_error_before_training(tmp_path, option, message):
    """Before: the option reached wandb.init at the first write: an ERROR with a traceback, a run without W&B, rc 0."""
    pytest.importorskip("wandb")
    work = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "rlearn", "train", str(ROOT / "examples" / "custom_policy.py"), "--work-dir", str(work),
         "--set", "train.max_env_steps=64", "eval.freq=none", f'learner.writers=["table",{{"type":"wandb",{option}}}]'],
        capture_output=True, text=True, cwd=ROOT, timeout=150, env={**__import__("os").environ, "WANDB_MODE": "offline"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith(message), done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (work / "ckpt").exists() and not (work / "wandb").exists()  # stopped before training
