"""benchmarks/README.md quotes the result files: each headline ratio in its tables is the one stored in
benchmarks/results/ (rounded as printed). A re-run benchmark that changes a file makes this fail until the
table is updated."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]
RESULTS = HERE / "results"
README = (HERE / "README.md").read_text(encoding="utf-8")


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def _td3_sb3_over_rlearn() -> float:
    rows = {row["variant"].split(" ")[0]: row for row in _load("td3_bench.json")["speed"]["rows"]}
    return rows["SB3"]["median_pair_ratio"]


def _mujoco_one_thread(algo: str) -> float:
    return next(entry["median"] for entry in _load("mujoco_vs_sb3_quick.json")["summary"]
                if (entry["algo"], entry["env"], entry["threads"]) == (algo, "halfcheetah", "1"))


HEADLINES = {
    "TD3 SB3 / rlearn": (_td3_sb3_over_rlearn, "SB3 / rlearn **{:.2f}x**"),
    "SAC median": (lambda: _load("sac_bench.json")["median_ratio"], "median **{:.2f}x**"),
    "SAC one step": (lambda: _load("sac_step_1thread.json")["median_ratio"], "**{:.2f}x** (rounds"),
    "DQN median": (lambda: _load("dqn_bench.json")["median_ratio"], "median **{:.2f}x**"),
    "PPO CartPole median": (lambda: _load("ppo_bench.json")["cartpole"]["report"]["speed_ratio_median"],
                            "median **{:.2f}x**"),
    "PPO Pendulum pair": (lambda: _load("ppo_bench.json")["pendulum_speed_pair"]["report"]["speed_ratio_median"],
                          "**{:.2f}x**"),
    "MuJoCo TD3 HalfCheetah": (lambda: _mujoco_one_thread("td3"), "TD3 HalfCheetah-v5 **{:.2f}x**"),
    "MuJoCo SAC HalfCheetah": (lambda: _mujoco_one_thread("sac"), "SAC HalfCheetah-v5 **{:.2f}x**"),
    "MuJoCo PPO HalfCheetah": (lambda: _mujoco_one_thread("ppo"), "PPO HalfCheetah-v5 **{:.2f}x**"),
    "PPG env steps/s": (lambda: _load("ppg_bench.json")["cartpole"]["report"]["steps_per_s_ratio_ppg_over_sb3"],
                        "env steps/s **{:.2f}x**"),
    "PPG time to 475": (lambda: _load("ppg_bench.json")["cartpole"]["report"]["time_to_target_ratio_ppg_over_sb3"],
                        "time to 475 PPG / SB3 {:.2f}x"),
}


@pytest.mark.parametrize("name", sorted(HEADLINES))
def test_readme_quotes_the_stored_result(name):
    value, pattern = HEADLINES[name]
    text = pattern.format(value())
    assert text in README, f"{name}: README should say {text!r}"


def test_sac_per_seed_ratios_are_the_stored_ones():
    ratios = _load("sac_bench.json")["ratios"]
    assert statistics.median(ratios) == pytest.approx(_load("sac_bench.json")["median_ratio"])
    assert " / ".join(f"{r:.2f}x" for r in ratios) in README.replace("**", "")
