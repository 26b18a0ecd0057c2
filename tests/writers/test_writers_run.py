"""A real tiny training run through ``rlearn.run.train`` with every writer, read back with each one's own
reader (JSONL by json, CSV by csv, TensorBoard by EventAccumulator, W&B offline files by wandb's DataStore,
MLflow by MlflowClient): the same numbers at the same steps in each, sparse keys absent, and a run that is
resumed from a checkpoint it had passed (what a crash after a checkpoint leaves) has no duplicate and no
missing point in any of them."""

from __future__ import annotations

import sys
import json
from pathlib import Path
from typing import Dict, List

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.config import load_config
from rlearn.hooks import Hook
from rlearn.logging import MessageHub
from rlearn.registry import HOOKS
from rlearn.run import train
from rlearn.writers import read_csv, read_jsonl, tb_tags

sys.path.insert(0, str(Path(__file__).parent))
from tracking_readers import mlflow_history, wandb_records  # noqa: E402

AXES = ("train_iter", "envstep", "time")


@HOOKS.register
class EveryThirdIterationScalar(Hook):
    """A user's hook recording ``hook/every_third`` = train_iter through the current MessageHub every 3rd
    iteration: a sparse key that enters the run beside the policy's and must reach every writer alike."""

    def before_run(self, learner):
        learner.declare_monitor_vars(["hook/every_third"])

    def after_iter(self, learner):
        if learner.train_iter % 3 == 0:
            MessageHub.get_current_instance().update_scalar("hook/every_third", float(learner.train_iter))


def td3_cfg(*overrides: str) -> dict:
    """TD3 on Pendulum shrunk to seconds (as tests/run/test_run.py), with the hook above."""
    return load_config("td3_pendulum", [
        "policy.hidden_sizes=[16]", "policy.batch_size=8", "policy.learning_starts=20", "policy.learn_threads=1",
        "env.kwargs.max_episode_steps=20", "train.max_env_steps=60", "learner.log_freq=10", "eval.freq=30",
        "eval.episodes=1", "checkpoint.freq=25", "checkpoint.keep=none", "buffer.size=1000",
        'learner.hooks=[{"type":"EveryThirdIterationScalar"}]', *overrides,
    ])


def tb_scalars(tb_dir: Path) -> Dict[str, List[tuple]]:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def check_same_numbers(work_dir: Path) -> List[dict]:
    """JSONL, CSV and TensorBoard hold the same rows; returns the JSONL rows."""
    rows = read_jsonl(work_dir / "metrics.jsonl")
    positions = [(r["train_iter"], r["envstep"]) for r in rows]
    assert positions == sorted(positions)
    # a log row and an evaluation row may share a position; two rows of one kind never do
    for kind in (True, False):
        same = [p for p, r in zip(positions, rows) if any(k.startswith("evaluator/") for k in r) == kind]
        assert len(same) == len(set(same)), f"duplicate rows in metrics.jsonl: {same}"

    table = read_csv(work_dir / "metrics.csv")
    assert len(table) == len(rows)
    for row, line in zip(rows, table):
        assert set(line) >= set(row)
        for name, cell in line.items():
            if name in row:
                assert float(cell) == row[name], (name, cell, row[name])  # same number, exactly
            else:
                assert cell == "", f"{name} has no value in this row but CSV shows {cell!r}"

    points = tb_scalars(work_dir / "tb")
    expected: Dict[str, List[tuple]] = {}
    for row in rows:
        for name, value in row.items():
            if name in AXES:
                continue
            iter_tag, step_tag = tb_tags(name)
            expected.setdefault(iter_tag, []).append((row["train_iter"], value))
            expected.setdefault(step_tag, []).append((row["envstep"], value))
    got = {tag: values for tag, values in points.items() if not tag.startswith("hparams/")}
    assert set(got) == set(expected)
    for tag, values in expected.items():
        assert [s for s, _ in got[tag]] == [s for s, _ in values], tag
        assert [v for _, v in got[tag]] == pytest.approx([v for _, v in values], rel=1e-6), tag  # float32
    return rows


def test_every_file_writer_holds_the_same_numbers_and_a_resume_adds_no_duplicate(tmp_path):
    writers = 'learner.writers=["table","tensorboard","jsonl","csv"]'
    straight = tmp_path / "straight"
    train(td3_cfg(writers), work_dir=straight)
    reference = check_same_numbers(straight)
    # sparse keys: evaluation numbers only in evaluation rows, learner numbers only in log rows
    evaluations = [r for r in reference if "evaluator/episode_return_mean" in r]
    assert [(r["train_iter"], r["envstep"]) for r in evaluations] == [(10, 30), (40, 60)]
    assert all("critic_loss_avg" not in r for r in evaluations)
    assert all("evaluator/episode_return_mean" not in r for r in reference if "critic_loss_avg" in r)
    # the hook's MessageHub key: the mean of the values of each 10-iteration window (3, 6, 9 -> 6; ...)
    assert [r["hook/every_third_avg"] for r in reference if "critic_loss_avg" in r] == [6.0, 15.0, 25.5, 36.0]

    crashed = tmp_path / "crashed"
    train(td3_cfg(writers), work_dir=crashed)  # ran to the end: rows after iteration 25 exist
    resumed = train(td3_cfg(writers), work_dir=crashed, resume=crashed / "ckpt" / "iteration_25.pt")
    assert resumed.train_iter == 40
    rows = check_same_numbers(crashed)
    assert [(r["train_iter"], r["envstep"], sorted(r)) for r in rows] == [
        (r["train_iter"], r["envstep"], sorted(r)) for r in reference
    ]


def test_tensorboard_holds_the_config_text_and_one_hparams_session(tmp_path):
    from tensorboard.plugins.hparams import metadata as hp_metadata

    result = train(td3_cfg(), work_dir=tmp_path)
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert "'max_env_steps': 60" in acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    start = hp_metadata.parse_session_start_info_plugin_data(
        acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content)
    assert start.hparams["train.max_env_steps"].number_value == 60
    assert start.hparams["policy.type"].string_value == "td3"
    final = result.last_eval["episode_return_mean"]
    assert [(e.step, e.value) for e in acc.Scalars("hparams/evaluator/episode_return_mean")] == [
        (40, pytest.approx(final, rel=1e-6))
    ]


def tracking_cfg(kind: str, tmp_path: Path) -> str:
    if kind == "wandb":
        return 'learner.writers=["table","jsonl",{"type":"wandb","mode":"offline","project":"rlearn-test"}]'
    uri = (tmp_path / "mlruns").as_uri()
    return f'learner.writers=["table","jsonl",{{"type":"mlflow","tracking_uri":"{uri}","experiment_name":"t"}}]'


@pytest.mark.parametrize("kind", ["wandb", "mlflow"])
def test_tracking_writers_hold_the_jsonl_numbers_after_a_resume(tmp_path, monkeypatch, kind):
    pytest.importorskip(kind)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_files"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    override = tracking_cfg(kind, tmp_path)
    work = tmp_path / "run"
    train(td3_cfg(override), work_dir=work)
    first = read_jsonl(work / "metrics.jsonl")
    train(td3_cfg(override), work_dir=work, resume=work / "ckpt" / "iteration_25.pt")
    resumed = read_jsonl(work / "metrics.jsonl")
    assert [(r["train_iter"], r["envstep"], sorted(r)) for r in resumed] == [
        (r["train_iter"], r["envstep"], sorted(r)) for r in first
    ]
    # the service cannot delete points: it keeps what the first process logged after the checkpoint, and
    # the resumed process logs only what comes after that (here: nothing new), so it holds the first rows
    rows = first

    run_id = json.loads((work / f"{kind}_run.json").read_text())["run_id"]
    if kind == "wandb":
        history, config, _ = wandb_records(tmp_path / "wandb_files", run_id)
        assert config["train"]["max_env_steps"] == 60
        expected = [{k: v for k, v in r.items() if k != "time"} for r in rows]
        assert [(h["train_iter"], h["envstep"], sorted(h)) for h in history] == [
            (e["train_iter"], e["envstep"], sorted(e)) for e in expected
        ]
        for got, want in zip(history, expected):
            for name, value in want.items():
                if not name.startswith(("throughput/", "data_time", "train_time")):
                    assert got[name] == pytest.approx(value, rel=1e-9), name
    else:
        history, params, status = mlflow_history((tmp_path / "mlruns").as_uri(), run_id)
        assert status == "FINISHED" and params["train.max_env_steps"] == "60"
        assert history["envstep"] == sorted({(r["train_iter"], float(r["envstep"])) for r in rows})
        for name in ("critic_loss_avg", "evaluator/episode_return_mean", "collector/episode_return_avg",
                     "hook/every_third_avg"):
            want = [(r["train_iter"], r[name]) for r in rows if name in r]
            assert [s for s, _ in history[name]] == [s for s, _ in want], name
            assert [v for _, v in history[name]] == pytest.approx([v for _, v in want], rel=1e-9), name
    assert sum("evaluator/episode_return_mean" in r for r in rows) == 2
