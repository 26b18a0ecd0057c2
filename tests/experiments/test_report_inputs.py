"""``rlearn report`` on experiment dirs it did not write itself: it runs no code from them, leaves out runs
that do not belong, says what the runs really did and what its statistics can and cannot tell, and names the
file and line of a row it cannot use (CLI as a subprocess, as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rliable")

from rlearn.config import dump_config, load_config  # noqa: E402

REPS = 50


def rlearn(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlearn", *args], capture_output=True, text=True, timeout=timeout)


def write_evaluations(work_dir: Path, rows) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def eval_rows(final: float, steps=(3072, 6144), start: float = 1000.0):
    return [{"envstep": s, "train_iter": s // 256, "time": start + 10.0 * (i + 1), "returns": [final * (i + 1) / len(steps)] * 2,
             "lengths": [10, 10]} for i, s in enumerate(steps)]


@pytest.fixture(scope="module")
def configs():
    """Resolved configs as a sweep writes them: the experiment's, and a foreign algorithm's."""
    ppo = load_config("ppo_cartpole", overrides=["train.max_env_steps=6000"])
    return {"ppo": ppo, "dqn": load_config("dqn_cartpole")}


def sweep_dir(root: Path, cfg, finals, name: str = "ppo_sweep") -> Path:
    """A sweep dir: ``config.py``, ``sweep.json`` and one run per final return, each with its config."""
    exp = root / name
    exp.mkdir(parents=True)
    dump_config(cfg, exp / "config.py")
    runs = {}
    for seed, final in enumerate(finals):
        work = exp / f"seed_{seed}"
        write_evaluations(work, eval_rows(final))
        dump_config({**cfg, "seed": seed}, work / "config.py")
        runs[str(seed)] = {"status": "finished", "work_dir": work.name, "attempts": 1, "wall_s": 1.0, "exit_code": 0}
    (exp / "sweep.json").write_text(json.dumps({"config": "ppo_cartpole", "overrides": [], "seeds": list(range(len(finals))),
                                                "runs": runs}))
    return exp


def test_report_runs_no_code_from_the_dirs_it_reads(tmp_path, configs):
    exp = sweep_dir(tmp_path, configs["ppo"], [100.0, 200.0, 300.0])
    marker = tmp_path / "code_ran"
    planted = f"open({str(marker)!r}, 'w').close()\n"
    for config in (exp / "config.py", exp / "seed_0" / "config.py"):
        config.write_text(planted + config.read_text())
    done = rlearn("report", str(exp), "-o", str(tmp_path / "out"), "--reps", str(REPS))
    assert not marker.exists(), "rlearn report executed a config.py of the dir it read"
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "report.md").read_text()
    assert "CartPole-v1" in text and "3 runs (3 finished)" in text  # the config literals read as data
    # a config.py that is code and no literal at all: that run cannot be told to belong, and still nothing runs
    (exp / "seed_1" / "config.py").write_text(planted + "config = dict(exp_name='x')\n")
    done = rlearn("report", str(exp), "-o", str(tmp_path / "out"), "--reps", str(REPS))
    assert not marker.exists()
    assert done.returncode == 0, done.stderr
    assert f"{exp / 'seed_1' / 'config.py'} is not a config rlearn wrote" in done.stderr
    assert f"{exp / 'seed_1'}: left out, it has no config.py that rlearn wrote" in done.stderr


def test_an_env_id_naming_a_module_imports_nothing(tmp_path, configs):
    """``env.id`` may name a module to import (``module:Env-v0``); the report looks up the environment's
    reward threshold only for registered ids, so a module planted beside the runs is never imported."""
    cfg = {**configs["ppo"], "env": {**configs["ppo"]["env"], "id": "planted_env:Planted-v0"}}
    exp = sweep_dir(tmp_path, cfg, [100.0, 200.0])
    marker = tmp_path / "module_imported"
    (exp / "planted_env.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run([sys.executable, "-m", "rlearn", "report", ".", "-o", str(tmp_path / "out"), "--reps", str(REPS)],
                          cwd=exp, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "rlearn report imported a module named in the runs' env.id"
    assert done.returncode == 0, done.stderr
    assert "planted_env:Planted-v0" in (tmp_path / "out" / "report.md").read_text()


def test_a_run_of_another_experiment_is_left_out_and_named(tmp_path, configs):
    exp = sweep_dir(tmp_path, configs["ppo"], [100.0, 200.0, 300.0])
    foreign = exp / "seed_9"  # a DQN run copied in: another algorithm and budget
    write_evaluations(foreign, eval_rows(14.0))
    dump_config(configs["dqn"], foreign / "config.py")
    other_lr = exp / "old_lr"  # a leftover of the same algorithm with another learning rate
    write_evaluations(other_lr, eval_rows(500.0))
    dump_config({**configs["ppo"], "policy": {**configs["ppo"]["policy"], "lr": 0.5}}, other_lr / "config.py")
    done = rlearn("report", str(exp), "-o", str(tmp_path / "out"), "--reps", str(REPS))
    assert done.returncode == 0, done.stderr
    assert f"{foreign}: left out, not a run of this experiment" in done.stderr
    assert "policy.type: 'ppo' -> 'dqn'" in done.stderr
    assert f"{other_lr}: left out, not a run of this experiment (policy.lr: 0.001 -> 0.5)" in done.stderr
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["sections"]["evaluation"]["scores"]["ppo_sweep"] == [100.0, 200.0, 300.0]
    text = (tmp_path / "out" / "report.md").read_text()
    assert "3 runs (3 finished)" in text
    # the runs did 6144 env steps (whole rollouts), not the configured 6000
    assert "6144 env steps per run (train.max_env_steps 6000)" in text
    assert "seed_9" in text and "left out" in text


def test_iqm_is_described_as_what_it_is_and_few_runs_give_no_verdict(tmp_path, configs):
    a = sweep_dir(tmp_path, configs["ppo"], [100.0, 110.0, 120.0], "lr_a")
    b = sweep_dir(tmp_path, configs["ppo"], [300.0, 310.0, 320.0], "lr_b")
    done = rlearn("report", str(a), str(b), "-o", str(tmp_path / "out"), "--reps", str(REPS))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "report.md").read_text()
    assert "mean of the middle 50 % of runs" not in text
    assert "with 3 runs nothing is trimmed: the IQM is the plain mean" in text
    assert "unreliable" in text and "at least 10 runs" in text
    # every run of lr_b beats every run of lr_a: P = 0 in every resample, a collapsed interval, no verdict
    assert "beats" not in text and "beats" not in done.stdout
    assert "collapsed" in text and "collapsed" in done.stdout


def test_nan_returns_are_left_out_and_all_nan_is_one_line(tmp_path):
    exp = tmp_path / "nan_exp"
    write_evaluations(exp / "seed_0", eval_rows(100.0))
    write_evaluations(exp / "seed_1", eval_rows(200.0))
    write_evaluations(exp / "seed_2", [{"envstep": 100, "time": 1.0, "returns": [float("nan")], "lengths": [1]}])
    done = rlearn("report", str(exp), "-o", str(tmp_path / "out"), "--reps", str(REPS))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "seed_2: left out" in done.stderr and "nan" in done.stderr
    only_nan = tmp_path / "all_nan"
    for seed in range(2):
        write_evaluations(only_nan / f"seed_{seed}", [{"envstep": 100, "time": 1.0, "returns": [float("nan")], "lengths": [1]}])
    done = rlearn("report", str(only_nan), "-o", str(tmp_path / "out2"), "--reps", str(REPS))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("rlearn report: error: no run has a finite")


WRONG_ROWS = [
    '[1, 2, 3]',
    '"text"',
    '{"time": 5.0, "returns": [1.0]}',
    '{"envstep": "a lot", "time": 5.0, "returns": [1.0]}',
    '{"envstep": 100, "time": 5.0, "returns": "many"}',
    '{"envstep": 100, "time": 5.0, "returns": ["x", 2]}',
    '{"envstep": 100, "time": 5.0, "returns": [[1.0], [2.0]]}',
    '{"envstep": 100, "time": {"s": 1}, "returns": [1.0]}',
    '{"envstep": true, "time": 5.0, "returns": [1.0]}',
    'null',
]


def test_evaluation_rows_of_the_wrong_shape_are_named_by_file_and_line(tmp_path):
    exp = tmp_path / "exp"
    bad_files = []
    for seed, bad in enumerate(WRONG_ROWS):
        write_evaluations(exp / f"seed_{seed}", eval_rows(100.0 + seed))
        path = exp / f"seed_{seed}" / "evaluations.jsonl"
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], bad, lines[1]]) + "\n")
        bad_files.append(path)
    done = rlearn("report", str(exp), "-o", str(tmp_path / "out"), "--reps", str(REPS))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "out" / "report.md").read_text()
    for path in bad_files:
        assert f"{path}:2: " in done.stderr and "skipped" in done.stderr, path
        assert f"Not read: {path}:2: " in report
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["sections"]["evaluation"]["scores"]["exp"] == [100.0 + seed for seed in range(len(WRONG_ROWS))]


def test_a_bad_train_key_value_is_named_by_file_and_line(tmp_path):
    exp = tmp_path / "exp"
    for seed in range(2):
        work = exp / f"seed_{seed}"
        write_evaluations(work, eval_rows(100.0))
        rows = [{"train_iter": 1, "envstep": 100, "time": 1.0, "collector/episode_return_last5": 10.0 + seed},
                {"train_iter": 2, "envstep": 200, "time": 2.0, "collector/episode_return_last5": "abc" if seed else 11.0},
                {"train_iter": 3, "envstep": 300, "time": 3.0, "collector/episode_return_last5": [1, 2] if seed else 12.0}]
        (work / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = rlearn("report", str(exp), "-o", str(tmp_path / "out"), "--reps", str(REPS), "--train-episodes", "5")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    metrics = exp / "seed_1" / "metrics.jsonl"
    assert f"{metrics}:2: " in done.stderr and f"{metrics}:3: " in done.stderr
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["sections"]["training"]["scores"]["exp"] == [12.0, 11.0]


def write_timed_run(work_dir: Path, final: float, seconds_per_iter: float, pause_after_iter=None, pause_s=0.0) -> None:
    """A run as it writes its rows: a log every 4 iterations with its throughput, an evaluation every 8
    (the last one returns ``final``); with ``pause_after_iter`` it was stopped there and resumed ``pause_s``
    seconds later."""
    work_dir.mkdir(parents=True)
    metrics, evaluations = [], []
    clock = 1000.0
    for it in range(4, 33, 4):
        clock += 4 * seconds_per_iter
        if pause_after_iter is not None and it == pause_after_iter + 4:
            clock += pause_s
        metrics.append({"train_iter": it, "envstep": it * 100, "time": clock, "throughput/iters_per_sec": 1 / seconds_per_iter,
                        "time/eval_s": 0.0, "time/checkpoint_s": 0.0})
        if it % 8 == 0:
            returns = [final * it / 32] * 2
            evaluations.append({"envstep": it * 100, "train_iter": it, "time": clock, "returns": returns, "lengths": [1, 1]})
    (work_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    (work_dir / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evaluations))


def test_the_time_axis_is_training_time_so_a_resumed_experiment_keeps_its_curve(tmp_path):
    from rlearn.experiments.report import TIME_AXIS, ReportOptions, build_report

    resumed, plain = tmp_path / "resumed", tmp_path / "plain"
    write_timed_run(resumed / "seed_0", 100.0, 1.0)
    write_timed_run(resumed / "seed_1", 200.0, 1.0, pause_after_iter=16, pause_s=5000.0)  # stopped, resumed later
    write_timed_run(plain / "seed_0", 300.0, 2.0)
    write_timed_run(plain / "seed_1", 400.0, 1.5)
    _, sections = build_report([resumed, plain], ReportOptions(reps=REPS))
    section = sections[0]
    assert section.time_axis == TIME_AXIS
    xs, iqm, _ = section.curves["time"]["resumed"]
    # 32 iterations at 1 s each, the 5000 s pause not counted; the IQM of two runs is their mean
    assert xs[0] == 8.0 and xs[-1] == 32.0 and iqm[-1] == pytest.approx(150.0)
    assert list(iqm) == pytest.approx([150.0 * x / 32 for x in xs])  # each run's return grows linearly in training time
    xs, iqm, _ = section.curves["time"]["plain"]
    # the faster run ended at 48 s and keeps its final score until the slower one ends at 64 s
    assert xs[-1] == 64.0 and iqm[-1] == pytest.approx(350.0)


def test_a_study_keeps_trials_of_other_parameters_but_not_of_another_environment(tmp_path, configs):
    """In a study's dir (``tune.json``) trials differ in their parameters by design: they belong when they
    share the environment, algorithm and budget."""
    from rlearn.experiments.report import ReportOptions, build_report

    study = tmp_path / "study"
    study.mkdir()
    dump_config(configs["ppo"], study / "config.py")
    (study / "tune.json").write_text("{}")
    for n, lr in enumerate((1e-3, 3e-4)):
        write_evaluations(study / f"trial_{n}", eval_rows(100.0 * (n + 1)))
        dump_config({**configs["ppo"], "policy": {**configs["ppo"]["policy"], "lr": lr}}, study / f"trial_{n}" / "config.py")
    write_evaluations(study / "trial_2", eval_rows(900.0))
    dump_config({**configs["ppo"], "env": {**configs["ppo"]["env"], "id": "Acrobot-v1"}}, study / "trial_2" / "config.py")
    experiments, sections = build_report([study], ReportOptions(reps=REPS))
    assert sections[0].scores["study"] == [100.0, 200.0]
    assert experiments[0].left_out == [f"{study / 'trial_2'}: left out, not a run of this experiment "
                                       "(env.id: 'CartPole-v1' -> 'Acrobot-v1')"]


def test_an_env_step_curve_cut_by_a_shorter_run_says_so(tmp_path):
    from rlearn.experiments.report import ReportOptions, build_report

    exp = tmp_path / "exp"
    write_evaluations(exp / "seed_0", eval_rows(100.0, steps=(1024, 2048, 3072)))
    write_evaluations(exp / "seed_1", eval_rows(200.0, steps=(1024, 2048)))  # stopped early
    _, sections = build_report([exp], ReportOptions(reps=REPS))
    assert sections[0].curves["envstep"]["exp"][0] == [1024.0, 2048.0]
    assert sections[0].curve_notes == ["envstep curve of exp: ends at 2048 env steps, where its shortest run ends; "
                                       "the later evaluations of 1 run(s) are not on it"]
