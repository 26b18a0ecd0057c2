"""benchmarks/curves.py: a comparison library's runs as work dirs that ``rlearn plot`` draws beside rlearn's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rlearn.commands.plot import load_run, prepare_curves
from rlearn.config import dump_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curves import RETURN_KEY, write_reference_run  # noqa: E402


def make_work_dir(root: Path, name: str, rows, config) -> Path:
    work = root / name
    work.mkdir(parents=True)
    (work / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dump_config(config, work / "config.py")
    return work


def cfg(seed: int) -> dict:
    return {"exp_name": "td3_pendulum", "seed": seed, "policy": {"type": "td3", "lr": 0.001},
            "train": {"max_env_steps": 100}}


def ev(it, env, value, t=0.0):
    return {"train_iter": it, "envstep": env, "time": t, "evaluator/episode_return_mean": value}


def test_benchmark_reference_runs_form_their_own_line_beside_rlearn_runs(tmp_path):
    """benchmarks/curves.py writes a comparison library's runs as work dirs that ``rlearn plot`` groups by
    exp_name: seeds of one library together, the two libraries apart, points exactly as given."""
    ours = [load_run(make_work_dir(tmp_path, f"r{s}", [ev(1, 1000, -500.0 + s)], cfg(s))) for s in range(2)]
    theirs = [load_run(write_reference_run(tmp_path / f"sb3_{s}", "sb3_td3", s, [(1000, -900.0 - s), (2000, -300.0)],
                                           times=[1.5, 3.0])) for s in range(2)]
    assert theirs[1].rows == [{"train_iter": 0, "envstep": 1000, "time": 1.5, RETURN_KEY: -901.0},
                              {"train_iter": 1, "envstep": 2000, "time": 3.0, RETURN_KEY: -300.0}]
    curves, warnings = prepare_curves(ours + theirs)
    assert warnings == []
    assert [(c.label, c.x, c.mean) for c in curves] == [
        ("td3_pendulum (2 runs)", [1000.0], [-499.5]), ("sb3_td3 (2 runs)", [1000.0, 2000.0], [-900.5, -300.0])]
