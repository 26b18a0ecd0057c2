"""benchmarks/bench_mujoco_vs_sb3.py's pure parts: the SB3 translation of the bundled MuJoCo configs, the
alternating order, the per-pair ratios and their summary."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_mujoco_vs_sb3 import pair_ratios, run_order, sb3_kwargs, summarise, summary_line  # noqa: E402

from rlearn.config import load_config  # noqa: E402


def run(library, seconds, pair=0, algo="td3", env="hopper", threads="1", process=None, load="2.00 1.50 1.00"):
    return dict(library=library, algo=algo, env=env, threads=threads, pair=pair, train_seconds=seconds,
                process_seconds=process if process is not None else seconds + 10.0, load_before=load,
                load_after=load)


def test_sb3_settings_are_the_configs_in_sb3_names():
    td3 = sb3_kwargs(load_config("td3_hopper")["policy"], learning_starts=10_000)
    assert td3 == dict(learning_starts=10_000, batch_size=256, gamma=0.99, tau=0.005, buffer_size=1_000_000,
                       train_freq=1, gradient_steps=1, policy_kwargs=dict(net_arch=[400, 300]), learning_rate=3e-4,
                       policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5, noise_std=0.1)
    sac = sb3_kwargs(load_config("sac_halfcheetah")["policy"], learning_starts=2_000)
    assert sac["learning_rate"] == 3e-4 and sac["ent_coef"] == "auto" and sac["learning_starts"] == 2_000
    assert sac["policy_kwargs"] == dict(net_arch=[256, 256])
    ppo = sb3_kwargs(load_config("ppo_halfcheetah")["policy"], learning_starts=10_000)
    assert ppo == dict(n_steps=512, batch_size=64, n_epochs=20, gamma=0.98, gae_lambda=0.92, learning_rate=2.0633e-05,
                       clip_range=0.1, ent_coef=0.000401762, vf_coef=0.58096, max_grad_norm=0.8,
                       policy_kwargs=dict(log_std_init=-2.0, ortho_init=False, activation="relu",
                                          net_arch=dict(pi=[256, 256], vf=[256, 256])))
    with pytest.raises(ValueError, match="'dqn'"):
        sb3_kwargs(dict(type="dqn"), 0)


def test_the_first_library_alternates():
    assert [run_order(pair) for pair in range(3)] == [["rlearn", "sb3"], ["sb3", "rlearn"], ["rlearn", "sb3"]]


def test_pair_ratios_are_sb3_over_rlearn_and_skip_incomplete_pairs():
    runs = [run("rlearn", 10.0, process=20.0, load="3.00 2.00 1.00"), run("sb3", 15.0, process=40.0, load="4.50 2.0 1.0"),
            run("rlearn", 8.0, pair=1), run("sb3", 4.0, pair=1), run("rlearn", 5.0, pair=2)]  # pair 2 has no SB3 run
    rows = pair_ratios(runs)
    assert [(row["pair"], row["ratio"], row["process_ratio"]) for row in rows] == [(0, 1.5, 2.0), (1, 0.5, 14.0 / 18.0)]
    assert rows[0]["load_1min"] == [3.0, 3.0, 4.5, 4.5] and rows[0]["rlearn_s"] == 10.0 and rows[0]["sb3_s"] == 15.0
    assert rows[0]["cpu_ratio"] is None  # runs that did not record their CPU time
    ours, theirs = run("rlearn", 10.0), run("sb3", 12.0)
    ours["train_cpu_seconds"], theirs["train_cpu_seconds"] = 8.0, 14.0
    summary = summarise(pair_ratios([ours, theirs]))
    assert summary[0]["cpu_median"] == 1.75 and "; CPU time 1.75x), load" in summary_line(summary[0])


def test_summary_per_algorithm_task_and_threads():
    runs = []
    for pair, (ours, theirs) in enumerate([(10.0, 20.0), (10.0, 12.0), (10.0, 30.0)]):
        runs += [run("rlearn", ours, pair=pair), run("sb3", theirs, pair=pair)]
    runs += [run("rlearn", 4.0, algo="sac", threads="default", load="?"), run("sb3", 6.0, algo="sac", threads="default",
                                                                             load="?")]
    summary = summarise(pair_ratios(runs))
    assert [(s["algo"], s["threads"], s["pairs"], s["median"], s["low"], s["high"]) for s in summary] == [
        ("sac", "default", 1, 1.5, 1.5, 1.5), ("td3", "1", 3, 2.0, 1.2, 3.0)]
    assert summary[0]["load_low"] is None and summary[1]["load_low"] == summary[1]["load_high"] == 2.0
    assert summary_line(summary[1]) == ("TD3 hopper      threads=1       SB3/rlearn 2.00x (pairs 3: 1.20-3.00x; whole "
                                        "process 1.50x), load 2.0-2.0")
    assert summary_line(summary[0]).endswith("load ?")


def test_merge_reports_the_runs_of_several_files_together(tmp_path, capsys):
    import json

    from bench_mujoco_vs_sb3 import main

    first = dict(steps=3000, learning_starts=1500, runs=[run("rlearn", 10.0), run("sb3", 16.0)])
    second = dict(steps=3000, learning_starts=1500, runs=[run("sb3", 9.0, pair=1), run("rlearn", 6.0, pair=1)])
    paths = []
    for name, part in (("a.json", first), ("b.json", second)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(part))
    assert main(["--merge", *map(str, paths), "--out", str(tmp_path / "out"), "--suffix", "_both"]) == 0
    merged = json.loads((tmp_path / "out" / "mujoco_vs_sb3_both.json").read_text())
    assert merged["steps"] == 3000 and len(merged["runs"]) == 4
    assert [row["ratio"] for row in merged["pairs"]] == [1.6, 1.5]
    assert merged["summary"][0]["pairs"] == 2 and merged["summary"][0]["median"] == pytest.approx(1.55)
    assert "SB3/rlearn 1.55x (pairs 2: 1.50-1.60x" in capsys.readouterr().out
