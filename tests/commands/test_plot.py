"""``rlearn plot``: the data preparation exactly (series, alignment across runs, bands, grouping by config
without the seed, missing keys) and the command as a subprocess writing a PNG."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlearn.commands.plot import PlotError, aggregate, group_runs, load_run, prepare_curves, series
from rlearn.config import dump_config

ROOT = Path(__file__).resolve().parents[2]


def make_work_dir(root: Path, name: str, rows, config=None) -> Path:
    work = root / name
    work.mkdir(parents=True)
    (work / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if config is not None:
        dump_config(config, work / "config.py")
    return work


def cfg(seed: int, lr: float = 0.001, exp_name: str = "td3_pendulum") -> dict:
    return {"exp_name": exp_name, "seed": seed, "policy": {"type": "td3", "lr": lr}, "train": {"max_env_steps": 100}}


def ev(it, env, value, t=0.0):
    return {"train_iter": it, "envstep": env, "time": t, "evaluator/episode_return_mean": value}


# ------------------------------------------------------------------------------------------ series
def test_series_skips_rows_without_the_key_and_keeps_the_last_of_equal_x():
    rows = [
        {"train_iter": 10, "envstep": 100, "time": 50.0, "loss_avg": 1.0},
        ev(10, 100, -5.0, 51.0),
        {"train_iter": 20, "envstep": 200, "time": 52.0, "loss_avg": 2.0},
        ev(20, 200, float("nan"), 53.0),  # a non-finite value is not drawn
        ev(30, 300, -3.0, 60.0),
        ev(30, 300, -2.0, 61.0),  # same x twice: the later row wins
    ]
    assert series(rows, "evaluator/episode_return_mean", "envstep") == ([100.0, 300.0], [-5.0, -2.0])
    assert series(rows, "evaluator/episode_return_mean", "iter") == ([10.0, 30.0], [-5.0, -2.0])
    assert series(rows, "evaluator/episode_return_mean", "time") == ([1.0, 10.0, 11.0], [-5.0, -3.0, -2.0])
    assert series(rows, "loss_avg", "envstep") == ([100.0, 200.0], [1.0, 2.0])
    assert series(rows, "missing", "envstep") == ([], [])


# ------------------------------------------------------------------------------------------ aggregate
def test_aggregate_on_shared_steps_mean_min_max_and_std():
    a = ([0.0, 10.0, 20.0], [1.0, 2.0, 3.0])
    b = ([0.0, 10.0, 20.0], [3.0, 6.0, 3.0])
    x, mean, low, high, count = aggregate([a, b], "minmax")
    assert (x, mean, low, high, count) == ([0.0, 10.0, 20.0], [2.0, 4.0, 3.0], [1.0, 2.0, 3.0], [3.0, 6.0, 3.0], [2, 2, 2])
    x, mean, low, high, count = aggregate([a, b], "std")
    assert low == [1.0, 2.0, 3.0] and high == [3.0, 6.0, 3.0]  # population std of two values = half the gap
    x, mean, low, high, count = aggregate([a, b], "none")
    assert low == mean == high == [2.0, 4.0, 3.0]


def test_aggregate_aligns_different_steps_by_interpolation_inside_each_run():
    a = ([0.0, 10.0, 20.0], [0.0, 10.0, 20.0])
    b = ([5.0, 15.0], [100.0, 200.0])  # starts later, stops earlier, logs at other steps
    c = ([0.0, 10.0, 20.0, 30.0], [2.0, 2.0, 2.0, 8.0])  # runs longer
    x, mean, low, high, count = aggregate([a, b, c], "minmax")
    assert x == [0.0, 5.0, 10.0, 15.0, 20.0, 30.0]
    assert count == [2, 3, 3, 3, 2, 1]
    assert mean == [1.0, (5.0 + 100.0 + 2.0) / 3, (10.0 + 150.0 + 2.0) / 3, (15.0 + 200.0 + 2.0) / 3, 11.0, 8.0]
    assert low == [0.0, 2.0, 2.0, 2.0, 2.0, 8.0]
    assert high == [2.0, 100.0, 150.0, 200.0, 20.0, 8.0]


# ------------------------------------------------------------------------------------------ grouping
def test_runs_that_differ_only_in_seed_and_exp_name_form_one_group(tmp_path):
    runs = [
        load_run(make_work_dir(tmp_path, "s0", [ev(1, 10, 1.0)], cfg(0))),
        load_run(make_work_dir(tmp_path, "s1", [ev(1, 10, 3.0)], cfg(1, exp_name="td3_pendulum_s1"))),
        load_run(make_work_dir(tmp_path, "lr", [ev(1, 10, 7.0)], cfg(0, lr=0.01))),
        load_run(make_work_dir(tmp_path, "bare", [ev(1, 10, 9.0)])),  # no config.py: a group of its own
    ]
    groups = group_runs(runs)
    assert [(label, [r.path.name for r in members]) for label, members in groups] == [
        ("policy.lr=0.001", ["s0", "s1"]), ("policy.lr=0.01", ["lr"]), ("bare", ["bare"]),
    ]
    assert [label for label, _ in group_runs(runs[:2])] == ["td3_pendulum, td3_pendulum_s1"]
    assert [label for label, _ in group_runs(runs[:1])] == ["td3_pendulum"]
    # groups that each carry one exp_name of their own are labelled by it
    named = [load_run(make_work_dir(tmp_path, "a", [ev(1, 10, 1.0)], cfg(0, exp_name="td3_pendulum"))),
             load_run(make_work_dir(tmp_path, "b", [ev(1, 10, 1.0)], cfg(1, exp_name="td3_pendulum"))),
             load_run(make_work_dir(tmp_path, "c", [ev(1, 10, 1.0)], cfg(0, lr=0.01, exp_name="sb3_td3")))]
    assert [(label, len(m)) for label, m in group_runs(named)] == [("td3_pendulum", 2), ("sb3_td3", 1)]
    # ignoring policy.lr too puts the first three together
    assert [len(m) for _, m in group_runs(runs, ("seed", "exp_name", "policy.lr"))] == [3, 1]


def test_prepare_curves_groups_seeds_and_reports_runs_without_the_key(tmp_path):
    runs = [
        load_run(make_work_dir(tmp_path, "s0", [ev(1, 10, 1.0), ev(2, 20, 2.0)], cfg(0))),
        load_run(make_work_dir(tmp_path, "s1", [ev(1, 10, 3.0), ev(2, 20, 6.0)], cfg(1))),
        load_run(make_work_dir(tmp_path, "s2", [{"train_iter": 1, "envstep": 10, "time": 0.0, "loss_avg": 1.0}], cfg(2))),
    ]
    curves, warnings = prepare_curves(runs, "evaluator/episode_return_mean", "envstep")
    (curve,) = curves
    assert curve.label == "td3_pendulum (2 runs)"
    assert (curve.x, curve.mean, curve.low, curve.high, curve.count) == (
        [10.0, 20.0], [2.0, 4.0], [1.0, 2.0], [3.0, 6.0], [2, 2])
    assert curve.runs == [str(tmp_path / "s0"), str(tmp_path / "s1")]
    assert warnings == [f"{tmp_path / 's2'}: no value of 'evaluator/episode_return_mean' in metrics.jsonl; left out"]
    with pytest.raises(PlotError, match=r"no run has a value of 'nope'; keys in these metrics.jsonl: "
                                        r"evaluator/episode_return_mean, loss_avg"):
        prepare_curves(runs, "nope")


def test_a_work_dir_without_metrics_is_named(tmp_path):
    with pytest.raises(PlotError, match=f"{tmp_path}: no metrics.jsonl"):
        load_run(tmp_path)


# ------------------------------------------------------------------------------------------ the command
def test_rlearn_plot_writes_a_png(tmp_path):
    dirs = [
        make_work_dir(tmp_path, f"s{seed}", [ev(i, 100 * i, float(i * (seed + 1)), 10.0 * i) for i in range(1, 6)], cfg(seed))
        for seed in range(3)
    ]
    dirs.append(make_work_dir(tmp_path, "lr", [ev(i, 100 * i, float(-i), 10.0 * i) for i in range(1, 6)], cfg(0, lr=0.1)))
    out = tmp_path / "plots" / "curves.png"
    proc = subprocess.run([sys.executable, "-m", "rlearn", "plot", *map(str, dirs), "-o", str(out), "--x", "time"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: evaluator/episode_return_mean over wall time, "
                                  "policy.lr=0.001 (3 runs); policy.lr=0.1 (")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000

    bad = subprocess.run([sys.executable, "-m", "rlearn", "plot", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"rlearn plot: error: {tmp_path / 'nowhere'}: no metrics.jsonl (is it a work dir " \
                                 "of a run with the 'jsonl' writer?)"
