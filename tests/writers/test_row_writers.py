"""JsonlWriter and CsvWriter read back with json and csv; rewind; building writers from the config; a failing
writer is reported once and disabled while the others go on; TensorBoard config text and HParams."""

from __future__ import annotations

import csv
import json
import logging

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata as hp_metadata

from policies.base import Policy
from rlearn.learner import BaseLearner
from rlearn.writers import (
    CsvWriter, JsonlWriter, TableWriter, TensorBoardWriter, Writer, build_writers, read_csv, read_jsonl,
)


class OneKeyPolicy(Policy):
    """Returns ``{"loss": 1.0}`` every iteration."""

    default_config: dict = {}

    def _init_learn(self):
        import torch

        self.net = torch.nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def _forward_learn(self, data):
        return {"loss": 1.0}

    def _monitor_vars_learn(self):
        return ["loss"]

    def _forward_collect(self, obs, envstep):
        return {}

    def _forward_eval(self, obs):
        return None

    def modules(self):
        return {"net": self.net}

    def optimizers(self):
        return {"opt": self.opt}


def make(cfg=None, **kwargs) -> BaseLearner:
    return BaseLearner(OneKeyPolicy(None, None, None), cfg, logger=logging.getLogger("rlearn.test.rows"), **kwargs)


class Clock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


WRITES = [
    ({"loss_avg": 1.5, "aux_avg": None}, 10, 70),
    ({"loss_avg": 2.25, "aux_avg": 0.125}, 20, 140),
    ({"evaluator/episode_return_mean": -3.0}, 20, 140),
    ({"loss_avg": None, "aux_avg": 4}, 30, 210),
]


def write_all(writer: Writer, writes=WRITES) -> None:
    for scalars, it, env in writes:
        writer.write_scalars(scalars, it, env)
        writer.flush()


# ------------------------------------------------------------------------------------------- JSONL
def test_jsonl_rows_read_back_with_json(tmp_path):
    writer = JsonlWriter(tmp_path / "metrics.jsonl", clock=Clock())
    write_all(writer)
    writer.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [
        {"train_iter": 10, "envstep": 70, "time": 1000.5, "loss_avg": 1.5},
        {"train_iter": 20, "envstep": 140, "time": 1001.0, "loss_avg": 2.25, "aux_avg": 0.125},
        {"train_iter": 20, "envstep": 140, "time": 1001.5, "evaluator/episode_return_mean": -3.0},
        {"train_iter": 30, "envstep": 210, "time": 1002.0, "aux_avg": 4},
    ]
    assert isinstance(rows[3]["aux_avg"], int)
    assert read_jsonl(tmp_path / "metrics.jsonl") == rows


def test_jsonl_numpy_and_tensor_values_are_plain_numbers(tmp_path):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    writer = JsonlWriter(tmp_path / "m.jsonl", clock=Clock())
    writer.write_scalars({"a": np.float32(0.5), "b": np.int64(3), "c": torch.tensor([2.0]), "d": True}, 1, 2)
    writer.close()
    assert read_jsonl(tmp_path / "m.jsonl") == [{"train_iter": 1, "envstep": 2, "time": 1000.5, "a": 0.5, "b": 3,
                                                 "c": 2.0, "d": 1}]


def test_jsonl_rewind_keeps_exactly_the_rows_of_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    writer = JsonlWriter(path, clock=Clock())
    write_all(writer, WRITES[:2])
    state = writer.state_dict()
    assert state == {"rows": 2}
    write_all(writer, WRITES[2:])  # written after the checkpoint (same train_iter as the last kept row)
    writer.close()
    with open(path, "a") as f:
        f.write('{"train_iter": 40, "env')  # a crash mid-write
    resumed = JsonlWriter(path, clock=Clock(2000.0))
    resumed.load_state_dict(state)
    resumed.rewind(20, 140)
    assert [(r["train_iter"], r["envstep"]) for r in read_jsonl(path)] == [(10, 70), (20, 140)]
    resumed.write_scalars({"evaluator/episode_return_mean": -2.0}, 20, 140)
    resumed.close()
    rows = read_jsonl(path)
    assert [(r["train_iter"], r.get("evaluator/episode_return_mean")) for r in rows] == [(10, None), (20, None), (20, -2.0)]
    assert path.read_text().count("\n") == 3


def test_jsonl_rewind_without_state_uses_train_iter_and_open_repairs_a_damaged_tail(tmp_path):
    path = tmp_path / "metrics.jsonl"
    writer = JsonlWriter(path, clock=Clock())
    write_all(writer)
    writer.close()
    other = JsonlWriter(path, clock=Clock())
    other.rewind(20, 140)
    assert [r["train_iter"] for r in read_jsonl(path)] == [10, 20, 20]
    with open(path, "a") as f:
        f.write('{"train_iter": 4')
    appender = JsonlWriter(path, clock=Clock())
    appender.write_scalars({"x_avg": 1.0}, 40, 280)
    appender.close()
    assert [r["train_iter"] for r in read_jsonl(path)] == [10, 20, 20, 40]


def test_row_writer_fsyncs_at_checkpoints_and_close_not_at_every_log(tmp_path, monkeypatch):
    import rlearn.writers.rowfile as rowfile

    synced = []
    monkeypatch.setattr(rowfile.os, "fsync", lambda fd: synced.append(fd))
    writer = JsonlWriter(tmp_path / "m.jsonl", clock=Clock())
    write_all(writer)  # four writes, each flushed
    assert synced == []
    assert writer.state_dict() == {"rows": 4} and len(synced) == 1  # a checkpoint asks for the state
    writer.FSYNC_EVERY_S = 0.0
    write_all(writer, WRITES[:1])
    assert len(synced) == 2
    writer.close()
    assert len(synced) == 3


# --------------------------------------------------------------------------------------------- CSV
def test_csv_header_grows_and_missing_values_are_empty(tmp_path):
    path = tmp_path / "metrics.csv"
    writer = CsvWriter(path, clock=Clock())
    write_all(writer)
    writer.close()
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    assert table == [
        ["train_iter", "envstep", "time", "loss_avg", "aux_avg", "evaluator/episode_return_mean"],
        ["10", "70", "1000.5", "1.5", "", ""],
        ["20", "140", "1001.0", "2.25", "0.125", ""],
        ["20", "140", "1001.5", "", "", "-3.0"],
        ["30", "210", "1002.0", "", "4", ""],
    ]
    assert read_csv(path)[2]["evaluator/episode_return_mean"] == "-3.0"


def test_csv_reopened_writer_keeps_the_header_and_rewinds_it(tmp_path):
    path = tmp_path / "metrics.csv"
    writer = CsvWriter(path, clock=Clock())
    write_all(writer, WRITES[:2])
    state = writer.state_dict()
    assert state == {"rows": 2, "columns": ["train_iter", "envstep", "time", "loss_avg", "aux_avg"]}
    write_all(writer, WRITES[2:])
    writer.close()
    resumed = CsvWriter(path, clock=Clock(3000.0))
    resumed.load_state_dict(state)
    resumed.rewind(20, 140)
    assert path.read_text().splitlines()[0] == "train_iter,envstep,time,loss_avg,aux_avg"
    resumed.write_scalars({"loss_avg": 9.0}, 30, 210)
    resumed.close()
    again = CsvWriter(path, clock=Clock(4000.0))  # no state: the header is read from the file
    again.write_scalars({"aux_avg": 1.0, "new_avg": 2.0}, 40, 280)
    again.close()
    with open(path, newline="") as f:
        table = list(csv.reader(f))
    assert table == [
        ["train_iter", "envstep", "time", "loss_avg", "aux_avg", "new_avg"],
        ["10", "70", "1000.5", "1.5", "", ""],
        ["20", "140", "1001.0", "2.25", "0.125", ""],
        ["30", "210", "3000.5", "9.0", "", ""],
        ["40", "280", "4000.5", "", "1.0", "2.0"],
    ]


# ----------------------------------------------------------------------------------- TensorBoard extras
def test_tensorboard_config_text_and_hparams_in_the_same_run_dir(tmp_path):
    writer = TensorBoardWriter(tmp_path / "tb")
    config = {"exp_name": "x", "seed": 3, "policy": {"type": "td3", "lr": 0.001, "hidden_sizes": [16]}}
    writer.write_config(config, 0)
    writer.write_scalars({"loss_avg": 1.0}, 5, 50)
    writer.write_hparams({"seed": 3, "policy.type": "td3", "policy.lr": 0.001, "policy.hidden_sizes": [16],
                          "profile": False}, {"evaluator/episode_return_mean": -150.5}, 5)
    writer.close()
    assert [p.parent for p in (tmp_path / "tb").rglob("*tfevents*")] == [tmp_path / "tb"]  # no sub-run
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    text = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "'lr': 0.001" in text and "'hidden_sizes': [16]" in text
    start = hp_metadata.parse_session_start_info_plugin_data(
        acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content)
    assert start.hparams["seed"].number_value == 3
    assert start.hparams["policy.type"].string_value == "td3"
    assert start.hparams["policy.hidden_sizes"].string_value == "[16]"
    assert start.hparams["profile"].bool_value is False
    experiment = hp_metadata.parse_experiment_plugin_data(
        acc.SummaryMetadata("_hparams_/experiment").plugin_data.content)
    assert [m.name.tag for m in experiment.metric_infos] == ["hparams/evaluator/episode_return_mean"]
    assert [(e.step, e.value) for e in acc.Scalars("hparams/evaluator/episode_return_mean")] == [(5, -150.5)]


def test_tensorboards_hparams_backend_sees_one_session_per_run_dir(tmp_path):
    """What the HParams tab reads, through TensorBoard's own hparams backend over ``--logdir work_dirs``."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    for name, lr in [("a", 0.001), ("b", 0.01)]:
        writer = TensorBoardWriter(tmp_path / name / "tb")
        writer.write_scalars({"loss_avg": 1.0}, 5, 50)
        writer.write_hparams({"seed": 0, "policy.lr": lr}, {"evaluator/episode_return_mean": -100.0 * lr}, 5)
        writer.close()
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(tmp_path))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(tmp_path))
    ctx = backend_context.Context(base_plugin.TBContext(logdir=str(tmp_path), multiplexer=mux, data_provider=provider))
    request = context.RequestContext()
    sessions = ctx.hparams_metadata(request, "")
    assert sorted(sessions) == ["a/tb", "b/tb"]  # the runs themselves, no sub-runs
    assert all("_hparams_/session_start_info" in tags for tags in sessions.values())
    experiment = ctx.experiment_from_metadata(request, "", True, sessions,
                                              ctx.hparams_from_data_provider(request, "", limit=None))
    assert sorted(h.name for h in experiment.hparam_infos) == ["policy.lr", "seed"]
    assert [m.name.tag for m in experiment.metric_infos] == ["hparams/evaluator/episode_return_mean"]
    last = ctx.read_last_scalars(request, "", None)
    assert last["a/tb"]["hparams/evaluator/episode_return_mean"].value == pytest.approx(-0.1)
    assert last["b/tb"]["hparams/evaluator/episode_return_mean"].value == pytest.approx(-1.0)


def test_tensorboard_rewind_drops_the_hparams_of_the_earlier_end(tmp_path):
    writer = TensorBoardWriter(tmp_path / "tb")
    writer.write_scalars({"loss_avg": 1.0}, 5, 50)
    state = writer.state_dict()
    writer.write_hparams({"seed": 1}, {"evaluator/episode_return_mean": -1.0}, 5)
    writer.close()
    resumed = TensorBoardWriter(tmp_path / "tb")
    resumed.load_state_dict(state)
    resumed.rewind(5, 50)
    resumed.write_hparams({"seed": 2}, {"evaluator/episode_return_mean": -2.0}, 9)
    resumed.close()
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    start = hp_metadata.parse_session_start_info_plugin_data(
        acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content)
    assert start.hparams["seed"].number_value == 2
    assert [(e.step, e.value) for e in acc.Scalars("hparams/evaluator/episode_return_mean")] == [(9, -2.0)]
    assert [(e.step, e.value) for e in acc.Scalars("learner_iter/loss_avg")] == [(5, 1.0)]


# ------------------------------------------------------------------------------------------ building
def test_build_writers_from_names_and_dicts(tmp_path):
    logger = logging.getLogger("rlearn.test.build")
    writers = build_writers(["table", {"type": "tensorboard"}, "jsonl", dict(type="csv")], tmp_path, logger)
    assert [type(w) for w in writers] == [TableWriter, TensorBoardWriter, JsonlWriter, CsvWriter]
    assert writers[2].path == tmp_path / "metrics.jsonl" and writers[3].path == tmp_path / "metrics.csv"
    assert [type(w) for w in build_writers(["table", "jsonl", "csv", "tensorboard"], None, logger)] == [TableWriter]
    with pytest.raises(ValueError, match="'tsv' is not a writer: use one of table, tensorboard, jsonl, csv"):
        build_writers(["tsv"], tmp_path, logger)
    with pytest.raises(TypeError, match="bad options for the 'jsonl' writer"):
        build_writers([dict(type="jsonl", colour="red")], tmp_path, logger)


def test_learner_writers_config_key(tmp_path):
    learner = make(work_dir=tmp_path, cfg={"writers": ["csv", "table"]})
    assert [type(w) for w in learner.writers] == [CsvWriter, TableWriter]


# ------------------------------------------------------------------------------------- failing writer
class Failing(Writer):
    def __init__(self, fail_on: int, exc: Exception) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.exc = exc
        self.closed = False

    def write_scalars(self, scalars, step_iter, step_env):
        self.calls += 1
        if self.calls >= self.fail_on:
            raise self.exc

    def write_text(self, tag, text, step_iter):
        pass

    def close(self):
        self.closed = True


def test_a_failing_writer_is_reported_once_by_name_and_the_others_go_on(tmp_path, caplog):
    failing = Failing(2, OSError(28, "No space left on device"))
    jsonl = JsonlWriter(tmp_path / "metrics.jsonl")
    learner = make(work_dir=tmp_path, writers=[failing, jsonl])
    with caplog.at_level(logging.ERROR):
        for i in range(4):
            learner.train(None, envstep=i + 1)
            learner.log_metrics()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert errors[0].getMessage().startswith(
        "writer Failing failed in write_scalars (OSError: [Errno 28] No space left on device): it is disabled")
    assert failing.calls == 2 and failing.closed
    assert learner.writers == [jsonl]
    assert learner.failed_writers == {"Failing": "OSError: [Errno 28] No space left on device"}
    assert [row["train_iter"] for row in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4]
    assert learner.save_checkpoint().exists()  # the checkpoint works without it


def test_a_writer_failing_on_flush_or_rewind_is_disabled_too(tmp_path, caplog):
    class BadFlush(Failing):
        def flush(self):
            raise RuntimeError("service unavailable")

    bad = BadFlush(10**9, RuntimeError())
    learner = make(work_dir=tmp_path, writers=[bad, TableWriter(logging.getLogger("rlearn.test.t"))])
    learner.train(None, envstep=1)
    with caplog.at_level(logging.ERROR):
        learner.log_metrics()
    assert [w.name for w in learner.writers] == ["TableWriter"]
    assert "writer BadFlush failed in flush (RuntimeError: service unavailable)" in caplog.text
