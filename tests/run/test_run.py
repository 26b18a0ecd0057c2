"""rlearn.run.train: update schedule, evaluation, TensorBoard output, resume, Ctrl-C, stop_value, work dirs."""

from __future__ import annotations

import io
import math
import os
import re
import signal
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.config import ConfigError, load_config
from rlearn.hooks import Hook
from rlearn.checkpoint import read_checkpoint
from rlearn.run import EPISODES_PER_WINDOW, Trainer, episode_window, train

from rlearn.writers.table import parse_log_tables

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")


def td3_cfg(*overrides: str) -> dict:
    """TD3 on Pendulum shrunk to seconds: tiny networks, 20-step episodes."""
    return load_config("td3_pendulum", [
        "policy.hidden_sizes=[16]", "policy.batch_size=8", "policy.learning_starts=20", "policy.learn_threads=1",
        "env.kwargs.max_episode_steps=20", "train.max_env_steps=60", "learner.log_freq=10", "eval.freq=30",
        "eval.episodes=1", "checkpoint.freq=25", "buffer.size=1000", *overrides,
    ])


def reinforce_cfg(*overrides: str) -> dict:
    """The custom REINFORCE example: 2 envs x 16 steps = 32 env steps per iteration."""
    return load_config(EXAMPLE, [
        "env.num_envs=2", "policy.rollout_steps=16", "policy.baseline_every=2", "policy.hidden=8",
        "train.max_env_steps=192", "learner.log_freq=3", "eval.freq=96", "eval.episodes=2", "eval.num_envs=2",
        "eval.stop_value=none", "checkpoint.freq=4", *overrides,
    ])


def scalars(tb_dir: Path) -> Dict[str, List[tuple]]:
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def steps(points: List[tuple]) -> List[int]:
    return [step for step, _ in points]


# ------------------------------------------------------------------------------- off-policy schedule
def expected_updates(max_steps: int, num_envs: int, collect_steps: int, learning_starts: int, ups: float) -> int:
    """Naive reference of the off-policy schedule: every collected env step once envstep > learning_starts
    (counted per collection) earns ``ups`` iterations; fractions carry over."""
    envstep, credit, total = 0, 0.0, 0
    while envstep < max_steps:
        envstep += num_envs * collect_steps
        if envstep > learning_starts:
            credit += ups * num_envs * collect_steps
            earned = math.floor(credit + 1e-9)
            credit -= earned
            total += earned
    return total


@pytest.mark.parametrize("num_envs, collect_steps, ups", [(1, 1, 1.0), (1, 1, 0.5), (2, 3, 1.0), (2, 1, 1.5)])
def test_off_policy_update_schedule(tmp_path, num_envs, collect_steps, ups):
    cfg = td3_cfg(f"env.num_envs={num_envs}", f"train.collect_steps={collect_steps}",
                  f"train.updates_per_step={ups}", "eval.freq=none", "checkpoint.freq=none")
    result = train(cfg, work_dir=tmp_path)
    assert result.envstep == math.ceil(60 / (num_envs * collect_steps)) * num_envs * collect_steps
    assert result.train_iter == expected_updates(60, num_envs, collect_steps, 20, ups)
    assert result.stop_reason == "max_env_steps"
    assert read_checkpoint(tmp_path / "ckpt" / "latest.pt")["train_iter"] == result.train_iter


def test_off_policy_outputs(tmp_path):
    result = train(td3_cfg(), work_dir=tmp_path)
    assert (result.train_iter, result.envstep) == (40, 60)
    points = scalars(tmp_path / "tb")
    # a table every 10 iterations; the run ends on one (40 = 60 steps past the 20 learning starts), so no
    # final table repeats it
    assert steps(points["learner_iter/critic_loss_avg"]) == [10, 20, 30, 40]
    # the periodic actor loss (every 2nd iteration) is there too
    assert steps(points["learner_iter/actor_loss_avg"]) == [10, 20, 30, 40]
    # env-step axis: iteration 10 happens at envstep 30 (the first iteration at envstep 21)
    assert steps(points["learner_step/critic_loss_avg"]) == [30, 40, 50, 60]
    # evaluations every 30 env steps, on both axes
    assert steps(points["evaluator_step/episode_return_mean"]) == [30, 60]
    assert steps(points["evaluator_iter/episode_return_mean"]) == [10, 40]
    for key in ("episode_return_std", "episode_return_min", "episode_return_max", "episode_length_mean"):
        assert steps(points[f"evaluator_step/{key}"]) == [30, 60]
    assert points["evaluator_step/episode_length_mean"][0][1] == 20.0  # the 20-step time limit
    # 20-step episodes end every 20 env steps: each window holds some
    assert steps(points["collector_iter/episode_return_avg"]) == [10, 20, 30, 40]
    assert points["collector_iter/episode_length_avg"][0][1] == 20.0
    for key in ("episode_return_mean", "episode_length_mean"):
        assert result.last_eval[key] == pytest.approx(points[f"evaluator_step/{key}"][1][1], rel=1e-6)
    log = result.log_file.read_text()
    assert "evaluation at envstep 30 (train_iter 10): episode_return " in log
    # the evaluation table (written by the TableWriter): train_iter, envstep and the result, names across
    assert "evaluator at train_iter 10  envstep 30\n" in log
    evaluator = [t for t in parse_log_tables(log) if "evaluator/episode_return_mean" in t]
    assert [(t["train_iter"], t["envstep"]) for t in evaluator] == [("10", "30"), ("40", "60")]
    assert re.fullmatch(r"-?[0-9.]+", evaluator[0]["evaluator/episode_return_mean"])
    assert f"tensorboard --logdir {tmp_path / 'tb'}" in log
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["best.pt", "iteration_25.pt", "iteration_40.pt",
                                                                      "latest.pt"]
    assert (tmp_path / "config.py").is_file()
    assert load_config(str(tmp_path / "config.py")) == result.config


def test_a_run_ending_on_a_log_iteration_logs_it_once(tmp_path):
    """40 iterations with log_freq 10: the last regular log is the last log (the final evaluation comes
    after it and adds no learner table), in the table, TensorBoard and metrics.jsonl alike."""
    import json

    result = train(td3_cfg(), work_dir=tmp_path)
    assert (result.train_iter, result.envstep) == (40, 60)
    assert steps(scalars(tmp_path / "tb")["learner_iter/critic_loss_avg"]) == [10, 20, 30, 40]
    assert steps(scalars(tmp_path / "tb")["throughput_iter/iters_per_sec"]) == [10, 20, 30, 40]
    learner_tables = [t for t in parse_log_tables(result.log_file.read_text()) if "critic_loss_avg" in t]
    assert [t["train_iter"] for t in learner_tables] == ["10", "20", "30", "40"]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["train_iter"] for r in rows if "critic_loss_avg" in r] == [10, 20, 30, 40]
    assert [r["envstep"] for r in rows if "evaluator/episode_return_mean" in r] == [30, 60]


def test_episode_window_holds_episodes():
    cfg = load_config("td3_pendulum")
    # 200-step episodes, one iteration per env step: EPISODES_PER_WINDOW episodes take 2000 iterations
    assert episode_window(cfg, 1.0, 200) == EPISODES_PER_WINDOW * 200 == 2000
    assert episode_window(cfg, 1.0, 20) == 1000  # never narrower than the monitor window (= log_freq)
    cfg = reinforce_cfg()
    assert episode_window(cfg, 1 / 32, 500) == math.ceil(EPISODES_PER_WINDOW * 500 / 32)


def test_run_sets_episode_windows_unless_configured(tmp_path):
    trainer = Trainer(td3_cfg(), work_dir=tmp_path / "a")
    try:
        assert trainer.learner.monitor.window_size("collector/episode_return") == 200  # 10 x 20-step episodes
        assert trainer.learner.monitor.window_size("critic_loss") == 10
    finally:
        trainer.close()
    trainer = Trainer(td3_cfg("learner.monitor_windows.collector/episode_return=7"), work_dir=tmp_path / "b")
    try:
        assert trainer.learner.monitor.window_size("collector/episode_return") == 7
        assert trainer.learner.monitor.window_size("collector/episode_length") == 200
    finally:
        trainer.close()


# --------------------------------------------------------------------------------------- on-policy
def test_on_policy_periodic_key_averaged_over_its_values(tmp_path):
    trainer = Trainer(reinforce_cfg(), work_dir=tmp_path)
    infos: List[dict] = []
    learn = trainer.policy._forward_learn

    def spy(data):
        info = learn(data)
        infos.append({k: float(v) for k, v in info.items()})
        return info

    trainer.policy._forward_learn = spy
    result = trainer.run()
    assert (result.train_iter, result.envstep) == (6, 192)
    assert [sorted(i) for i in infos] == [
        ["entropy", "policy_loss"], ["baseline_loss", "entropy", "policy_loss"]] * 3
    points = scalars(tmp_path / "tb")
    # window = log_freq = 3 iterations: iterations 1-3 hold one baseline fit (iteration 2), 4-6 hold two (4 and 6)
    baseline = points["learner_iter/baseline_loss_avg"]
    assert steps(baseline) == [3, 6]
    assert baseline[0][1] == pytest.approx(infos[1]["baseline_loss"], rel=1e-6)
    assert baseline[1][1] == pytest.approx((infos[3]["baseline_loss"] + infos[5]["baseline_loss"]) / 2, rel=1e-6)
    policy_loss = points["learner_iter/policy_loss_avg"]
    assert policy_loss[1][1] == pytest.approx(sum(i["policy_loss"] for i in infos[3:6]) / 3, rel=1e-6)
    assert steps(points["learner_step/baseline_loss_avg"]) == [96, 192]
    assert steps(points["evaluator_step/episode_return_mean"]) == [96, 192]


def test_same_seed_same_curves(tmp_path):
    first = train(reinforce_cfg(), work_dir=tmp_path / "a")
    second = train(reinforce_cfg(), work_dir=tmp_path / "b")
    a, b = scalars(first.tb_dir), scalars(second.tb_dir)
    for tag in ("learner_iter/policy_loss_avg", "learner_iter/baseline_loss_avg", "evaluator_step/episode_return_mean"):
        assert a[tag] == b[tag]
    # each run's log holds only its own lines
    assert str(tmp_path / "b") not in first.log_file.read_text()


def test_stop_value_ends_the_run(tmp_path):
    result = train(reinforce_cfg("eval.stop_value=1.0", "eval.freq=64"), work_dir=tmp_path)
    assert result.stop_reason == "stop_value"
    assert (result.envstep, result.train_iter) == (64, 2)
    assert "stop_value reached: episode_return_mean" in result.log_file.read_text()
    assert read_checkpoint(tmp_path / "ckpt" / "latest.pt")["train_iter"] == 2


# ------------------------------------------------------------------------------------ resume, Ctrl-C
class InterruptAt(Hook):
    """Sends this process a SIGINT after iteration ``n`` (as Ctrl-C would)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def after_iter(self, learner) -> None:
        if learner.train_iter == self.n:
            os.kill(os.getpid(), signal.SIGINT)


def assert_clean_curves(points: Dict[str, List[tuple]]) -> None:
    for tag, values in points.items():
        assert steps(values) == sorted(set(steps(values))), f"{tag} has duplicate or unordered steps"


def test_ctrl_c_saves_then_resume_finishes_exactly(tmp_path):
    trainer = Trainer(td3_cfg(), work_dir=tmp_path)
    trainer.learner.register_hook(InterruptAt(15))
    result = trainer.run()
    assert result.stop_reason == "interrupted" and result.interrupted
    assert result.train_iter == 15 and result.envstep == 35
    saved = read_checkpoint(tmp_path / "ckpt" / "latest.pt")
    assert (saved["train_iter"], saved["envstep"]) == (15, 35)
    assert saved["states"]["collector"]["envstep"] == 35
    assert len(saved["states"]["replay_buffer"]["data"]["obs"]) == 35
    assert "Ctrl-C: stopping at train_iter 15, envstep 35; saving a checkpoint" in result.log_file.read_text()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler given back

    resumed = train(td3_cfg(), work_dir=tmp_path, resume=True)
    assert (resumed.train_iter, resumed.envstep, resumed.stop_reason) == (40, 60, "max_env_steps")
    points = scalars(tmp_path / "tb")
    assert_clean_curves(points)
    assert steps(points["learner_iter/critic_loss_avg"]) == [10, 15, 20, 30, 40]
    assert steps(points["evaluator_step/episode_return_mean"]) == [30, 60]


def test_resume_continues_pending_updates(tmp_path):
    # 2 envs x 3 steps = 6 env steps per collection -> 6 iterations; stop in the middle of them
    cfg = td3_cfg("env.num_envs=2", "train.collect_steps=3", "eval.freq=none")
    trainer = Trainer(cfg, work_dir=tmp_path)
    trainer.learner.register_hook(InterruptAt(8))
    first = trainer.run()
    assert first.train_iter == 8
    assert read_checkpoint(tmp_path / "ckpt" / "latest.pt")["states"]["run"]["pending_updates"] == 4
    resumed = train(cfg, work_dir=tmp_path, resume=True)
    assert resumed.train_iter == expected_updates(60, 2, 3, 20, 1.0) == 42
    assert resumed.envstep == 60


def test_fresh_run_refuses_a_used_work_dir(tmp_path):
    train(reinforce_cfg("train.max_env_steps=32"), work_dir=tmp_path)
    assert str(pytest.raises(ConfigError, Trainer, reinforce_cfg(), work_dir=tmp_path).value) == (
        f"work dir '{tmp_path}' already holds a run ({tmp_path / 'ckpt'} holds checkpoints); continue it with "
        "--resume, or choose another --work-dir (or delete it)"
    )
    missing = tmp_path / "nope.pt"
    assert str(pytest.raises(ConfigError, Trainer, reinforce_cfg(), work_dir=tmp_path, resume=missing).value) == (
        f"--resume: no checkpoint at '{missing}'"
    )


def test_bad_env_and_policy_values_are_config_errors(tmp_path):
    message = str(pytest.raises(ConfigError, train, reinforce_cfg("env.id=CartPol-v1"), work_dir=tmp_path / "a").value)
    assert message.startswith("env ('CartPol-v1'): unknown environment id 'CartPol-v1'")
    message = str(pytest.raises(ConfigError, train, reinforce_cfg("policy.baseline_every=0"), work_dir=tmp_path / "b").value)
    assert message == "policy 'reinforce_demo' (ReinforcePolicy): policy.baseline_every must be >= 1, got 0"


def test_profile_records_eval_and_checkpoint_spans(tmp_path):
    from rlearn import trace

    result = train(reinforce_cfg("profile=true"), work_dir=tmp_path)
    assert not trace.is_enabled()  # switched off again at the end
    text = (tmp_path / "trace" / "rank0.jsonl").read_text()
    assert "evaluator/eval" in text and "checkpoint/save" in text
    assert result.trace_dir == tmp_path / "trace"


def test_hooks_from_config_replace_the_defaults(tmp_path):
    cfg = reinforce_cfg("learner.hooks=[{'type': 'LogShowHook', 'freq': 2}]")
    trainer = Trainer(cfg, work_dir=tmp_path)
    try:
        names = [type(h).__name__ for h in trainer.learner.hooks]
        assert names.count("LogShowHook") == 1 and "TimerHook" in names and "CheckpointHook" in names
        assert trainer.learner.get_hook("LogShowHook").freq == 2
    finally:
        trainer.close()


# ------------------------------------------------------------------------------------- progress bar
class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(monkeypatch):
    from rlearn.progress import progress_wanted

    monkeypatch.delenv("RLEARN_NO_PROGRESS", raising=False)
    assert progress_wanted(None, FakeTTY()) is True
    assert progress_wanted(None, io.StringIO()) is False
    assert progress_wanted(False, FakeTTY()) is False
    monkeypatch.setenv("RLEARN_NO_PROGRESS", "1")
    assert progress_wanted(None, FakeTTY()) is False
    assert progress_wanted(True, FakeTTY()) is False  # the environment variable wins


def test_progress_bar_shows_steps_and_keeps_log_lines_whole(monkeypatch):
    from rlearn.progress import ProgressBar

    err, out = FakeTTY(), FakeTTY()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", out)
    with ProgressBar(total=100, initial=10, enabled=True, desc="exp") as bar:
        assert sys.stdout is not out  # log lines are routed around the bar
        print("first line")
        sys.stdout.write("partial")
        assert out.getvalue() == "first line\n"  # a partial line waits for its newline
        sys.stdout.write(" line\n")
        bar.update(50, eval_return=12.5)
        sys.stdout.write("tail")
    assert sys.stdout is out
    assert out.getvalue() == "first line\npartial line\ntail"
    shown = err.getvalue()
    assert "exp" in shown and "50/100" in shown and "eval_return=12.5" in shown


def test_disabled_progress_bar_touches_nothing(monkeypatch):
    from rlearn.progress import ProgressBar

    err = FakeTTY()
    monkeypatch.setattr("sys.stderr", err)
    stdout = sys.stdout
    with ProgressBar(total=100, enabled=False) as bar:
        assert sys.stdout is stdout
        bar.update(50, eval_return=1.0)
    assert err.getvalue() == ""


def test_resuming_a_finished_run_adds_no_point(tmp_path):
    first = train(td3_cfg("eval.freq=none"), work_dir=tmp_path)
    before = scalars(tmp_path / "tb")
    again = train(td3_cfg("eval.freq=none"), work_dir=tmp_path, resume=True)
    assert (again.train_iter, again.envstep) == (first.train_iter, first.envstep) == (40, 60)
    assert scalars(tmp_path / "tb") == before


def test_default_work_dir_is_not_reused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = train(reinforce_cfg("train.max_env_steps=32"))
    second = train(reinforce_cfg("train.max_env_steps=32"))
    assert first.work_dir == Path("work_dirs/reinforce_cartpole")
    assert second.work_dir == Path("work_dirs/reinforce_cartpole_2")
    assert "work_dirs/reinforce_cartpole already holds a run: this new run writes to work_dirs/reinforce_cartpole_2" in (
        second.log_file.read_text())
    resumed = train(reinforce_cfg("train.max_env_steps=64"), resume=True)  # resumes the most recent one
    assert resumed.work_dir == second.work_dir and resumed.train_iter == 2


def test_custom_cfg_shows_episode_return_mean_and_max_over_different_windows(tmp_path):
    """docs/logging.md's example: ``collector/episode_return`` as its mean over the key's tick window (the
    default) and, beside it, the max over the last 100 episodes, in the table and on both TensorBoard axes."""
    cfg = reinforce_cfg()
    cfg["learner"]["log_processor"]["custom_cfg"] = [
        dict(data_src="collector/episode_return", method_name="max", log_name="episode_return_max100", last_n=100)]
    trainer = Trainer(cfg, work_dir=tmp_path)
    learner = trainer.learner
    recorded: List[tuple] = []  # (tick, return) of every ended episode
    record = learner.record

    def spy(info):
        if "collector/episode_return" in info:
            recorded.append((learner.monitor.tick_count, float(info["collector/episode_return"])))
        return record(info)

    learner.record = spy
    result = trainer.run()
    assert result.train_iter == 6 and len(recorded) >= 2
    window = learner.monitor.window_size("collector/episode_return")
    points = scalars(tmp_path / "tb")
    means, maxima = points["collector_iter/episode_return_avg"], points["collector_iter/episode_return_max100"]
    assert steps(maxima) == [3, 6] and steps(points["collector_step/episode_return_max100"]) == [96, 192]
    for (log_iter, mean), (_, maximum) in zip(means, maxima):
        # at the log of iteration n the monitor is at tick n - 1 (the tick comes after the after_iter hooks)
        in_window = [r for tick, r in recorded if log_iter - 1 - window < tick <= log_iter - 1]
        so_far = [r for tick, r in recorded if tick <= log_iter - 1][-100:]
        assert mean == pytest.approx(sum(in_window) / len(in_window), rel=1e-6)
        assert maximum == pytest.approx(max(so_far), rel=1e-6)
    tables = [table for table in parse_log_tables((tmp_path / f"{cfg['exp_name']}.log").read_text())
              if "collector/episode_return_max100" in table]
    assert [table["train_iter"] for table in tables] == ["3", "6"]
    assert float(tables[-1]["collector/episode_return_max100"]) == pytest.approx(maxima[-1][1], rel=1e-4)
