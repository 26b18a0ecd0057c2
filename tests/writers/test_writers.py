"""Writers: the interface, the table writer's text and the TensorBoard writer read back with EventAccumulator."""

from __future__ import annotations

import logging
from typing import Dict, List

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.writers import TableWriter, TensorBoardWriter, Writer, tb_tags
from rlearn.writers.table import parse_table


def read_scalars(logdir) -> Dict[str, List[tuple]]:
    acc = EventAccumulator(str(logdir), purge_orphaned_data=False, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def parse_tables(text):
    return parse_table(text)


class Keep(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: List[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def keep_logger(name):
    logger = logging.getLogger(f"rlearn.test.writers.{name}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Keep()
    logger.addHandler(handler)
    return logger, handler


def test_writer_is_abstract_and_defaults_do_nothing():
    with pytest.raises(TypeError):
        Writer()

    class Only(Writer):
        def write_scalars(self, scalars, step_iter, step_env):
            pass

    with pytest.raises(TypeError):  # write_text is required too
        Only()

    class Minimal(Only):
        def write_text(self, tag, text, step_iter):
            pass

    writer = Minimal()
    assert writer.name == "Minimal" and writer.state_dict() is None
    writer.flush(), writer.close(), writer.rewind(3, 30), writer.load_state_dict({})


def test_tb_tags_of_final_names():
    assert tb_tags("loss_avg") == ("learner_iter/loss_avg", "learner_step/loss_avg")
    assert tb_tags("collector/epsilon_avg") == ("collector_iter/epsilon_avg", "collector_step/epsilon_avg")
    assert tb_tags("evaluator/episode_return_mean") == ("evaluator_iter/episode_return_mean", "evaluator_step/episode_return_mean")
    assert tb_tags("throughput/env_steps_per_sec") == ("throughput_iter/env_steps_per_sec", "throughput_step/env_steps_per_sec")
    assert tb_tags("a/b/c") == ("a_iter/b/c", "a_step/b/c")


def test_table_writer_columns_dash_and_heading():
    logger, handler = keep_logger("table")
    writer = TableWriter(logger, width=200)
    writer.write_scalars({"loss_avg": 5.5, "aux_avg": None, "loss_nonfinite": 2, "collector/epsilon_avg": 0.25}, 10, 70)
    message = handler.messages[-1]
    assert message.startswith("train_iter 10  envstep 70\n")
    cells = parse_tables(message)
    assert list(cells) == ["train_iter", "envstep", "loss_avg", "loss_nonfinite", "aux_avg", "collector/epsilon_avg"]
    assert list(cells.values()) == ["10", "70", "5.5", "2", "-", "0.25"]
    assert writer.last_table in message
    writer.write_scalars({"evaluator/episode_return_mean": -1.5, "evaluator/episode_return_std": 0.5}, 11, 30)
    assert handler.messages[-1].startswith("evaluator at train_iter 11  envstep 30\n")
    assert parse_tables(handler.messages[-1])["evaluator/episode_return_mean"] == "-1.5"
    writer.write_text("config", "lr = 0.1", 3)
    assert handler.messages[-1] == "config (train_iter 3)\nlr = 0.1"
    narrow = TableWriter(logger, width=40)
    narrow.write_scalars({f"k{i}_avg": float(i) for i in range(6)}, 1, 2)
    assert max(len(line) for line in handler.messages[-1].splitlines()[1:]) <= 40
    for bad in (10, True, 2.5):
        with pytest.raises(ValueError, match="width"):
            TableWriter(logger, width=bad)


def test_tensorboard_writer_both_axes_and_no_point_for_none(tmp_path):
    writer = TensorBoardWriter(tmp_path / "tb")
    writer.write_scalars({"loss_avg": None}, 1, 10)
    assert not (tmp_path / "tb").exists()  # nothing to write: no file opened
    writer.write_scalars({"loss_avg": 1.5, "aux_avg": None, "collector/epsilon_avg": 0.5}, 2, 20)
    writer.write_scalars({"loss_avg": 2.5, "aux_avg": 7.0, "throughput/iters_per_sec": 3.0}, 4, 40)
    writer.write_text("notes", "hello", 4)
    writer.flush()
    got = read_scalars(tmp_path / "tb")
    assert got == {
        "learner_iter/loss_avg": [(2, 1.5), (4, 2.5)],
        "learner_step/loss_avg": [(20, 1.5), (40, 2.5)],
        "learner_iter/aux_avg": [(4, 7.0)],
        "learner_step/aux_avg": [(40, 7.0)],
        "collector_iter/epsilon_avg": [(2, 0.5)],
        "collector_step/epsilon_avg": [(20, 0.5)],
        "throughput_iter/iters_per_sec": [(4, 3.0)],
        "throughput_step/iters_per_sec": [(40, 3.0)],
    }
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    assert "notes/text_summary" in acc.Tags()["tensors"]
    assert writer.state_dict() == {"points": {tag: [points[-1][0], 1] for tag, points in got.items()},
                                   "totals": {tag: len(points) for tag, points in got.items()}}
    writer.close()
    assert writer.event_file is None


def test_tensorboard_writer_rewind_from_state(tmp_path):
    """A run writes to 4, saves the writer state at 2, "crashes"; the resumed writer rewinds to 2."""
    first = TensorBoardWriter(tmp_path)
    for it in (1, 2):
        first.write_scalars({"x_avg": float(it)}, it, 10 * it)
    state = first.state_dict()
    for it in (3, 4):
        first.write_scalars({"x_avg": float(it), "late_avg": 9.0}, it, 10 * it)
    first.flush()

    resumed = TensorBoardWriter(tmp_path, logger=logging.getLogger("rlearn.test.writers.rewind"))
    resumed.load_state_dict(state)
    report = resumed.rewind(2, 20)
    assert report.points_removed == 8  # x and late at iterations 3 and 4, each on both axes
    for it in (3, 5):
        resumed.write_scalars({"x_avg": float(it)}, it, 10 * it)
    resumed.close()
    got = read_scalars(tmp_path)
    assert got["learner_iter/x_avg"] == [(1, 1.0), (2, 2.0), (3, 3.0), (5, 5.0)]
    assert got["learner_step/x_avg"] == [(10, 1.0), (20, 2.0), (30, 3.0), (50, 5.0)]
    assert "learner_iter/late_avg" not in got


def test_a_writer_of_ones_own_receives_the_learners_logs(tmp_path):
    """The docs' example: a writer that keeps rows in memory gets exactly what the table shows."""
    from rlearn.hooks import LogShowHook
    from rlearn.learner import BaseLearner
    from tests.hooks.test_log_show_hook import PeriodicPolicy

    class Rows(Writer):
        def __init__(self):
            self.rows = []

        def write_scalars(self, scalars, step_iter, step_env):
            self.rows.append((step_iter, step_env, dict(scalars)))

        def write_text(self, tag, text, step_iter):
            self.rows.append((step_iter, tag, text))

    logger, handler = keep_logger("own")
    rows = Rows()
    learner = BaseLearner(PeriodicPolicy(None, None, None), dict(log_freq=5), work_dir=tmp_path, logger=logger,
                          writers=[TableWriter(logger, width=400), rows])
    learner.register_hook(LogShowHook(), "BELOW_NORMAL")
    for i in range(1, 11):
        learner.train(None, envstep=3 * i)
    learner.write_text("note", "done")
    assert not (tmp_path / "tb").exists()  # writers given explicitly: no TensorBoard
    assert [(it, env) for it, env, _ in rows.rows[:2]] == [(5, 15), (10, 30)]
    first = rows.rows[0][2]
    assert list(first)[:2] == ["throughput/iters_per_sec", "throughput/env_steps_per_sec"]
    assert {k: first[k] for k in ("loss_avg", "aux_avg", "never_avg")} == {"loss_avg": 3.0, "aux_avg": 105.0, "never_avg": None}
    table = parse_tables([m for m in handler.messages if m.startswith("train_iter 5 ")][0])
    throughput = [k for k in first if k.startswith("throughput/")]
    paused = [k for k in first if k.startswith("time/")]
    assert paused == ["time/eval_s", "time/checkpoint_s"]
    # grouped: the learner's keys, then throughput and the time group last
    assert list(table)[2:] == [k for k in first if k not in throughput + paused] + throughput + paused
    assert rows.rows[-1] == (10, "note", "done")
    with pytest.raises(TypeError, match="Writer instances"):
        BaseLearner(PeriodicPolicy(None, None, None), writers=[object()])
