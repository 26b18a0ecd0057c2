"""Every writer through random ``kill -9``s and resumes (slow): a run with the table, ``metrics.jsonl``, CSV,
TensorBoard, W&B (offline) and MLflow (a local store) is killed at random moments (the whole process group:
W&B's service dies with it, the worst case), resumed each time with ``--resume``, and finished. Then every
writer is read back with its own reader (the log's tables with ``parse_log_tables``, JSONL and CSV as text,
TensorBoard with ``EventAccumulator``, W&B's transaction logs with its ``DataStore``, MLflow with
``MlflowClient``) and compared point by point: every log and evaluation point exactly once in each, at the
positions of an uninterrupted run.

Between a checkpoint and a kill, the killed process had measured some points that the resumed process
measures again (with fresh environment episodes: other values). The files rewind and hold the resumed values;
W&B and MLflow cannot delete points and keep whichever process's value they hold. So a value is checked
against the values the processes measured at that point (each process logged its tables), and the files
against the last one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from rlearn.checkpoint import find_resume_checkpoint, read_checkpoint
from rlearn.writers import read_csv, read_jsonl, tb_tags
from rlearn.writers.table import format_value, parse_log_tables

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "writers"))
import run_fault_helpers as helpers  # noqa: E402
from tracking_readers import mlflow_history, wandb_records  # noqa: E402

ITERATIONS = 480  # 8 env steps each
LOG_FREQ, CHECKPOINT_FREQ, EVAL_FREQ = 5, 20, 480  # evaluations every 60 iterations
KILLS = 6
AXES = ("train_iter", "envstep", "time")
Key = Tuple[int, int, bool]  # (train_iter, envstep, is an evaluation)


def kind_of(row) -> bool:
    return any(name.startswith("evaluator/") for name in row if name not in AXES)


def key_of(row) -> Key:
    return int(row["train_iter"]), int(row["envstep"]), kind_of(row)


def last_checkpoint_iter(work: Path) -> int:
    try:
        path, _ = find_resume_checkpoint(work / "ckpt")
        return int(read_checkpoint(path)["train_iter"])
    except Exception:  # noqa: BLE001 - none yet, or one being written
        return -1


def start(args: List[str], env: Dict[str, str], output: Path) -> subprocess.Popen:
    """``rlearn ARGS`` in a session of its own (W&B's service process joins it), output to a file."""
    with open(output, "ab") as sink:
        return subprocess.Popen([sys.executable, "-m", "rlearn", *args], stdout=sink, stderr=subprocess.STDOUT,
                                cwd=helpers.ROOT, env=env, start_new_session=True)


@pytest.mark.slow
def test_random_kills_and_resumes_leave_every_writer_with_every_point_once(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's own switch for a local file store
    rng = random.Random(int(os.environ.get("RLEARN_KILL_SEED", time.time_ns() % 10**6)))
    uri = (tmp_path / "mlruns").as_uri()
    writers = ["table", "tensorboard", "jsonl", "csv", dict(type="wandb", mode="offline", project="kills"),
               dict(type="mlflow", tracking_uri=uri, experiment_name="kills")]
    config = helpers.probe_config(
        tmp_path, name="kills", max_env_steps=8 * ITERATIONS, checkpoint=dict(freq=CHECKPOINT_FREQ, keep=2),
        learner=dict(log_freq=LOG_FREQ, monitor_window=5, writers=writers),
        eval=dict(freq=EVAL_FREQ, episodes=1, stop_value=None))
    work = tmp_path / "run"
    env = helpers.child_env(WANDB_DIR=str(tmp_path / "wandb_files"), WANDB_SILENT="true",
                            MLFLOW_ALLOW_FILE_STORE="true")
    args = ["train", str(config), "--work-dir", str(work)]
    kills = []
    for attempt in range(KILLS):
        target = min(ITERATIONS - 40, (attempt + 1) * ITERATIONS // (KILLS + 2) + rng.randrange(CHECKPOINT_FREQ))
        proc = start(args, env, tmp_path / "output.txt")
        try:
            helpers.wait_for(lambda: last_checkpoint_iter(work) >= target or proc.poll() is not None, 240,
                             what=f"a checkpoint at {target}")
            assert proc.poll() is None, (tmp_path / "output.txt").read_text()[-3000:]
            time.sleep(rng.uniform(0.0, 0.6))  # anywhere: mid-iteration, mid-log, mid-save, mid-evaluation
            os.killpg(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        kills.append(last_checkpoint_iter(work))
        args = ["train", str(config), "--work-dir", str(work), "--resume"]
    done = subprocess.run([sys.executable, "-m", "rlearn", *args], capture_output=True, text=True, cwd=helpers.ROOT,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(kills) == KILLS and kills == sorted(kills), kills

    # ------------------------------------------------------------------ metrics.jsonl: the reference
    rows = read_jsonl(work / "metrics.jsonl")
    keys = [key_of(row) for row in rows]
    assert len(keys) == len(set(keys)), "a point twice in metrics.jsonl"
    assert keys == sorted(keys, key=lambda k: (k[0], k[1]))
    logs = [(k[0], k[1]) for k in keys if not k[2]]
    evaluations = [(k[0], k[1]) for k in keys if k[2]]
    assert logs == [(i, 8 * i) for i in range(LOG_FREQ, ITERATIONS + 1, LOG_FREQ)]
    per_eval = EVAL_FREQ // 8
    assert evaluations == [(i, 8 * i) for i in range(per_eval, ITERATIONS + 1, per_eval)]
    by_key = {key_of(row): {k: v for k, v in row.items() if k not in AXES} for row in rows}

    # ---------------------------------------------------------------- the log's tables (every process)
    measured: Dict[Key, Dict[str, Set[str]]] = {}
    last_table: Dict[Key, Dict[str, str]] = {}
    for table in parse_log_tables((work / "kills.log").read_text()):
        cells = {k: v for k, v in table.items() if k not in ("train_iter", "envstep") and v != "-"}
        key = (int(table["train_iter"]), int(table["envstep"]), kind_of(cells))
        last_table[key] = cells
        for name, text in cells.items():
            measured.setdefault(key, {}).setdefault(name, set()).add(text)
    assert set(last_table) == set(by_key)
    for key, values in by_key.items():  # the files hold what the last process measured at each point
        assert {k: format_value(v) for k, v in values.items()} == last_table[key], key

    # ------------------------------------------------------------------------------------------ CSV
    table = read_csv(work / "metrics.csv")
    assert len(table) == len(rows)
    for row, line in zip(rows, table):
        assert {k: float(v) for k, v in line.items() if v != ""} == {k: float(v) for k, v in row.items()}

    # ---------------------------------------------------------------------------------- TensorBoard
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    expected: Dict[str, List[tuple]] = {}
    for row in rows:
        for name, value in row.items():
            if name not in AXES:
                iter_tag, step_tag = tb_tags(name)
                expected.setdefault(iter_tag, []).append((row["train_iter"], value))
                expected.setdefault(step_tag, []).append((row["envstep"], value))
    got = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]
           if not tag.startswith("hparams/")}
    assert set(got) == set(expected)
    for tag, points in expected.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in points], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in points], rel=1e-6), tag

    def check_measured(key: Key, name: str, value: float) -> None:
        assert format_value(value) in measured[key][name], (key, name, value, measured[key][name])

    # ------------------------------------------------------------------------------------------ W&B
    run_id = json.loads((work / "wandb_run.json").read_text())["run_id"]
    history, _, _ = wandb_records(tmp_path / "wandb_files", run_id)
    wandb_keys = [key_of(row) for row in history]
    assert sorted(wandb_keys) == sorted(by_key), "W&B lacks points or holds some twice"
    for row, key in zip(history, wandb_keys):
        assert set(row) - {"train_iter", "envstep"} == set(by_key[key]), key
        for name, value in row.items():
            if name not in AXES:
                check_measured(key, name, value)

    # --------------------------------------------------------------------------------------- MLflow
    run_id = json.loads((work / "mlflow_run.json").read_text())["run_id"]
    metrics, _, status = mlflow_history(uri, run_id)
    assert status == "FINISHED"
    assert metrics.pop("envstep") == sorted({(k[0], float(k[1])) for k in by_key})
    names = {name for values in by_key.values() for name in values}
    assert set(metrics) == names
    for name, points in metrics.items():
        keys_with = sorted(key for key, values in by_key.items() if name in values)
        assert [step for step, _ in points] == [key[0] for key in keys_with], name  # each point once
        for (_, value), key in zip(points, keys_with):
            check_measured(key, name, value)
