"""``rlearn report``: its numbers are rliable's, called directly on the same scores; its files and errors.

The experiment dirs here are written by hand (``evaluations.jsonl`` and ``metrics.jsonl`` as runs write
them), so the scores are known exactly; tests/experiments/test_experiments_sweep.py does the same over real sweeps.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rliable")
from rliable import library as rly  # noqa: E402
from rliable import metrics  # noqa: E402

from rlearn.experiments.child import ExperimentError  # noqa: E402
from rlearn.experiments.report import ReportOptions, build_report  # noqa: E402

REPS = 100


def write_run(work_dir: Path, evaluations, train_returns=(), start=1000.0, step_s=2.0) -> None:
    """A work dir as a run leaves it: ``evaluations`` is ``[(envstep, [returns...]), ...]``; each training
    row carries ``collector/episode_return_last5``."""
    work_dir.mkdir(parents=True)
    with open(work_dir / "evaluations.jsonl", "w") as out:
        for i, (step, returns) in enumerate(evaluations):
            out.write(json.dumps({"envstep": step, "train_iter": step // 100, "time": start + step_s * (i + 1),
                                  "returns": returns, "lengths": [int(r) for r in returns]}) + "\n")
    with open(work_dir / "metrics.jsonl", "w") as out:
        out.write(json.dumps({"train_iter": 0, "envstep": 0, "time": start, "loss_avg": 1.0}) + "\n")
        for i, value in enumerate(train_returns):
            step = (i + 1) * 100
            out.write(json.dumps({"train_iter": i + 1, "envstep": step, "time": start + i + 1,
                                  "collector/episode_return_last5": value}) + "\n")


#: final evaluation returns of each run (mean of the episodes)
RUNS = {
    "algo_a": [[10.0, 30.0], [50.0, 70.0], [100.0, 100.0], [20.0, 20.0], [470.0, 500.0]],
    "algo_b": [[200.0, 220.0], [300.0, 300.0], [480.0, 500.0], [150.0, 150.0]],
}


@pytest.fixture
def exp_dirs(tmp_path):
    dirs = []
    for name, runs in RUNS.items():
        exp = tmp_path / name
        for seed, final in enumerate(runs):
            first = [r / 2 for r in final]
            write_run(exp / f"seed_{seed}", [(500, first), (1000, final)],
                      train_returns=[seed * 10.0 + k for k in range(3)] if name == "algo_a" else [seed + 100.0])
        dirs.append(exp)
    return dirs


def final_scores(name):
    return np.array([np.mean(r) for r in RUNS[name]]).reshape(-1, 1)


def aggregate(target):
    return lambda s: np.array([metrics.aggregate_iqm(s), np.median(s), metrics.aggregate_mean(s),
                               metrics.aggregate_optimality_gap(s, target)])


def test_report_numbers_equal_rliable_called_directly(exp_dirs):
    experiments, sections = build_report(exp_dirs, ReportOptions(reps=REPS, seed=7, target=475.0))
    section = sections[0]
    assert section.kind == "evaluation"
    scores = {name: final_scores(name) for name in RUNS}
    assert {k: v for k, v in section.scores.items()} == {k: list(v[:, 0]) for k, v in scores.items()}

    np.random.seed(7)
    points, intervals = rly.get_interval_estimates(scores, aggregate(475.0), reps=REPS)
    for name in RUNS:
        got = section.aggregates[name]
        assert [got[m].value for m in ("IQM", "median", "mean", "optimality gap")] == list(points[name])
        assert [got[m].low for m in ("IQM", "median", "mean", "optimality gap")] == list(intervals[name][0])
        assert [got[m].high for m in ("IQM", "median", "mean", "optimality gap")] == list(intervals[name][1])
    # the IQM of algo_a's five runs (20, 60, 100, 20, 485): mean of the middle ones after trimming 25 % each side
    assert section.aggregates["algo_a"]["IQM"].value == pytest.approx(metrics.aggregate_iqm(scores["algo_a"]))

    np.random.seed(7)
    poi, poi_ci = rly.get_interval_estimates({"a > b": (scores["algo_a"], scores["algo_b"])},
                                             metrics.probability_of_improvement, reps=REPS)
    e = section.improvement[("algo_a", "algo_b")]
    assert (e.value, e.low, e.high) == (poi["a > b"], poi_ci["a > b"][0][0], poi_ci["a > b"][1][0])
    assert e.value == pytest.approx(sum(x > y for x, y in itertools.product(scores["algo_a"][:, 0], scores["algo_b"][:, 0]))
                                    / 20)

    np.random.seed(7)
    profiles, profile_cis = rly.create_performance_profile(scores, np.asarray(section.taus), reps=REPS)
    for name in RUNS:
        assert list(section.profiles[name][0]) == list(profiles[name])
        assert section.profiles[name][1].tolist() == np.asarray(profile_cis[name]).tolist()

    # IQM curve over env steps: both runs' evaluations at 500 and 1000, per point rliable's aggregate_iqm
    curves = {name: np.array([[[np.mean(r) / 2, np.mean(r)]] for r in RUNS[name]]) for name in RUNS}
    np.random.seed(7)
    iqm_points, iqm_cis = rly.get_interval_estimates(
        curves, lambda s: np.array([metrics.aggregate_iqm(s[..., i]) for i in range(s.shape[-1])]), reps=REPS)
    for name in RUNS:
        xs, iqm, ci = section.curves["envstep"][name]
        assert xs == [500.0, 1000.0]
        assert iqm == pytest.approx(iqm_points[name], rel=1e-12)
        assert ci == pytest.approx(iqm_cis[name], rel=1e-12)


def test_training_score_is_the_last_value_of_the_key(exp_dirs):
    _, sections = build_report(exp_dirs, ReportOptions(reps=REPS, train_key="collector/episode_return_last5"))
    training = {s.kind: s for s in sections}["training"]
    assert training.scores["algo_a"] == [2.0, 12.0, 22.0, 32.0, 42.0]
    assert training.scores["algo_b"] == [100.0, 101.0, 102.0, 103.0]


def test_normalised_scores_and_default_target(exp_dirs):
    _, sections = build_report(exp_dirs, ReportOptions(reps=REPS, normalize=(0.0, 500.0)))
    section = sections[0]
    assert section.target == 1.0
    assert section.scores["algo_b"] == pytest.approx([0.42, 0.6, 0.98, 0.3])


def test_command_writes_the_report_and_its_figures(exp_dirs, tmp_path):
    out = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "rlearn", "report", *map(str, exp_dirs), "-o", str(out),
                           "--reps", str(REPS), "--target", "475", "--train-episodes", "5"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "algo_b beats algo_a" in done.stdout
    text = (out / "report.md").read_text()
    saved = json.loads((out / "scores.json").read_text())
    iqm = saved["sections"]["evaluation"]["aggregates"]["algo_b"]["IQM"]
    assert f"| algo_b | 4 | {iqm['value']:.4g} [{iqm['low']:.4g}, {iqm['high']:.4g}]" in text
    assert "last value of `collector/episode_return_last5`" in text
    for png in ("aggregates", "performance_profile", "sample_efficiency_envstep", "sample_efficiency_time",
                "aggregates_train", "sample_efficiency_envstep_train"):
        assert (out / f"{png}.png").stat().st_size > 5000, png
        assert f"({png}.png)" in text


def test_bad_inputs_are_one_line_errors(tmp_path, exp_dirs, monkeypatch):
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "rlearn", "report", str(tmp_path / "empty")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"rlearn report: error: {tmp_path / 'empty'}: no runs (no sub-directory with a metrics.jsonl or evaluations.jsonl)"
    with pytest.raises(ExperimentError, match="LOW < HIGH"):
        build_report(exp_dirs, ReportOptions(normalize=(1.0, 1.0)))
    monkeypatch.setitem(sys.modules, "rliable", None)
    from rlearn.executables import executable

    with pytest.raises(ExperimentError, match="install it with: " + re.escape(f"{executable('pip')} install -c "
                                                                              "constraints.txt -e '.[experiments]'")):
        build_report(exp_dirs, ReportOptions())
