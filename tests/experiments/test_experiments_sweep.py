"""``rlearn sweep``: seeds as separate runs, killed and started again without losing or duplicating a point;
``rlearn report`` over two real sweeps gives rliable's numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rlearn.experiments.child import ExperimentError, JsonlTail, clear_unresumable, has_checkpoint, thread_settings
from rlearn.experiments.sweep import parse_seeds

#: a PPO run of 32 iterations, long enough to be caught half way, with evaluations and a log every 4 iterations
BUDGET = ["train.max_env_steps=8192", "learner.log_freq=4", "eval.freq=2048", "eval.episodes=2", "eval.num_envs=2"]
#: the second sweep of the report test: shorter still
SHORT = ["train.max_env_steps=1024", "eval.freq=512"]


def sweep_command(out: Path, seeds: str, *extra: str) -> list:
    return [sys.executable, "-m", "rlearn", "sweep", "ppo_cartpole", "--seeds", seeds, "--jobs", "2", "--out", str(out),
            "--no-progress", "--set", *BUDGET, *extra]


def test_parse_seeds():
    assert parse_seeds("0-9") == list(range(10))
    assert parse_seeds("3,1, 2") == [3, 1, 2]
    assert parse_seeds("0-2,2,10") == [0, 1, 2, 10]
    for bad in ("", "a", "3-1", "1-", "-2"):
        with pytest.raises(ExperimentError, match="--seeds"):
            parse_seeds(bad)


def test_thread_settings_share_the_cores():
    assert thread_settings(None, 2, cores=8) == (["num_threads=4"], {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"})
    assert thread_settings(1, 2, cores=8) == ([], {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    assert thread_settings(6, 2, cores=8)[0] == ["num_threads=4"]
    assert thread_settings(None, 4, cores=2)[0] == ["num_threads=1"]  # never 0 threads


def test_jsonl_tail_reads_complete_lines_and_restarts_on_a_rewritten_file(tmp_path):
    path = tmp_path / "evaluations.jsonl"
    tail = JsonlTail(path)
    assert tail.new_rows() == []
    path.write_text('{"envstep": 1}\n{"envstep": 2')
    assert tail.new_rows() == [{"envstep": 1}]
    with open(path, "a") as out:
        out.write('}\n')
    assert tail.new_rows() == [{"envstep": 2}]
    replacement = tmp_path / "new"
    replacement.write_text('{"envstep": 1}\n')
    replacement.replace(path)  # what a resumed run's rewind does
    assert tail.new_rows() == [{"envstep": 1}] and tail.restarted == 1


def test_a_run_without_checkpoint_is_cleared_but_keeps_its_console_log(tmp_path):
    run = tmp_path / "seed_0"
    (run / "tb").mkdir(parents=True)
    (run / "tb" / "events.out.tfevents.1").write_bytes(b"x")
    (run / "metrics.jsonl").write_text('{"train_iter": 1}\n')
    (run / "console.log").write_text("$ rlearn train ...\n")
    assert not has_checkpoint(run)
    assert clear_unresumable(run)
    assert sorted(p.name for p in run.iterdir()) == ["console.log"]
    (run / "ckpt").mkdir()
    (run / "ckpt" / "iteration_3.pt").write_bytes(b"x")
    (run / "metrics.jsonl").write_text('{"train_iter": 1}\n')
    assert has_checkpoint(run) and not clear_unresumable(run)
    assert (run / "metrics.jsonl").is_file()


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def assert_no_duplicated_points(work_dir: Path) -> None:
    """Every log row, evaluation and TensorBoard point exactly once, in order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlearn.writers.jsonl import read_jsonl

    rows = read_jsonl(work_dir / "metrics.jsonl")
    logs = [r["train_iter"] for r in rows if "policy_loss_avg" in r]
    evals = [r["envstep"] for r in rows if "evaluator/episode_return_mean" in r]
    # every 4th iteration, plus the last table a stopped run writes before its checkpoint
    assert logs == sorted(set(logs)) and set(range(4, 33, 4)) <= set(logs) and logs[-1] == 32, logs
    # one evaluation per 2048 steps, at the first iteration past each multiple (a run stopped right at one
    # evaluates it after its next iteration once resumed)
    assert len(evals) == 4 and all(2048 * k <= e < 2048 * k + 256 for k, e in enumerate(evals, 1)), evals
    raw = [json.loads(line)["envstep"] for line in (work_dir / "evaluations.jsonl").read_text().splitlines()]
    assert raw == evals
    acc = EventAccumulator(str(work_dir / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    for tag in ("learner_iter/policy_loss_avg", "evaluator_step/episode_return_mean"):
        steps = [e.step for e in acc.Scalars(tag)]
        assert steps == sorted(set(steps)), (tag, steps)
    assert [e.step for e in acc.Scalars("evaluator_step/episode_return_mean")] == evals


@pytest.fixture(scope="module")
def killed_and_restarted_sweep(tmp_path_factory):
    """A 3-seed sweep stopped with SIGTERM while its first runs train, then started again."""
    out = tmp_path_factory.mktemp("sweeps") / "ppo_a"
    first = subprocess.Popen(sweep_command(out, "0-2"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def training_half_way() -> bool:
        return any(len(JsonlTail(out / f"seed_{s}" / "metrics.jsonl").new_rows()) >= 2 for s in (0, 1))

    wait_for(training_half_way, 240, "a run to train")
    first.terminate()  # SIGTERM (a scheduler's stop): the sweep passes it on; each run saves a checkpoint and stops
    first.communicate(timeout=120)
    assert first.returncode == 143
    killed_state = json.loads((out / "sweep.json").read_text())
    second = subprocess.run(sweep_command(out, "0-2"), capture_output=True, text=True, timeout=600)
    return out, killed_state, second


def test_killed_sweep_resumes_to_three_complete_runs_without_duplicates(killed_and_restarted_sweep):
    out, killed_state, second = killed_and_restarted_sweep
    assert second.returncode == 0, second.stdout + second.stderr
    unfinished = [s for s, run in killed_state["runs"].items() if run["status"] != "finished"]
    assert unfinished, "the kill came after every run had finished"
    state = json.loads((out / "sweep.json").read_text())
    assert {s: r["status"] for s, r in state["runs"].items()} == {"0": "finished", "1": "finished", "2": "finished"}
    resumed = [s for s in ("0", "1") if "--resume" in (out / f"seed_{s}" / "console.log").read_text()]
    assert resumed, "no run was resumed from its checkpoint"
    assert "resuming" in second.stdout
    for seed in range(3):
        work_dir = out / f"seed_{seed}"
        assert_no_duplicated_points(work_dir)
        assert f"    'seed': {seed}," in (work_dir / "config.py").read_text()
    # started once more, nothing is left to do
    again = subprocess.run(sweep_command(out, "0-2"), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "3 seeds, 0 to run" in again.stdout


@pytest.mark.slow  # a second sweep (about 80 s on 2 busy cores); test_experiments_report.py checks the same numbers on written runs
def test_report_over_two_sweeps_equals_rliable(killed_and_restarted_sweep, tmp_path):
    pytest.importorskip("rliable")
    from rliable import library as rly
    from rliable import metrics

    out_a, _, _ = killed_and_restarted_sweep
    out_b = out_a.parent / "ppo_b"
    done = subprocess.run(sweep_command(out_b, "0-2", "policy.lr=3e-3", *SHORT), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "rlearn", "report", str(out_a), str(out_b), "-o", str(report),
                           "--reps", "200"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    saved = json.loads((report / "scores.json").read_text())["sections"]["evaluation"]
    scores = {}
    for name, out in (("ppo_a", out_a), ("ppo_b", out_b)):
        finals = []
        for seed in range(3):
            last = json.loads((out / f"seed_{seed}" / "evaluations.jsonl").read_text().splitlines()[-1])
            finals.append(np.mean(last["returns"]))
        scores[name] = np.array(finals).reshape(-1, 1)
        assert saved["scores"][name] == finals
    np.random.seed(0)
    points, intervals = rly.get_interval_estimates(
        scores, lambda s: np.array([metrics.aggregate_iqm(s), np.median(s), metrics.aggregate_mean(s),
                                    metrics.aggregate_optimality_gap(s, 475.0)]), reps=200)
    for name in scores:
        got = saved["aggregates"][name]
        assert [got[m]["value"] for m in ("IQM", "median", "mean", "optimality gap")] == list(points[name])
        assert [[got[m]["low"], got[m]["high"]] for m in ("IQM", "median", "mean", "optimality gap")] == \
            intervals[name].T.tolist()
    np.random.seed(0)
    poi, poi_ci = rly.get_interval_estimates({"x": (scores["ppo_a"], scores["ppo_b"])},
                                             metrics.probability_of_improvement, reps=200)
    pair = saved["probability_of_improvement"][0]
    assert (pair["x"], pair["y"]) == ("ppo_a", "ppo_b")
    assert [pair["value"], pair["low"], pair["high"]] == [poi["x"], poi_ci["x"][0][0], poi_ci["x"][1][0]]


def test_a_different_config_in_the_same_dir_is_refused(killed_and_restarted_sweep):
    out, _, _ = killed_and_restarted_sweep
    done = subprocess.run(sweep_command(out, "0-2", "policy.lr=0.5"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "holds an experiment of another config (policy.lr: 0.001 -> 0.5)" in done.stderr
