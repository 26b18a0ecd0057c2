"""A policy's collect-side metric end to end: _forward_collect -> Collector -> learner monitor -> table and
TensorBoard on both axes, with sparse semantics (recorded only on the collects that report it)."""

from __future__ import annotations

import logging
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlearn.config import load_config
from rlearn.run import train
from rlearn.registry import get_policy_class, register_policy
from rlearn.writers.table import parse_log_tables

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")
NUM_ENVS, ROLLOUT = 2, 16
STEPS_PER_ITER = NUM_ENVS * ROLLOUT


def epsilon_reinforce():
    """The REINFORCE example plus ``epsilon``: on the rollouts ``k`` = 0, 2, 4... (the collect before
    iteration ``k + 1``) it reports ``k`` at the rollout's first step and ``k + 0.5`` at its second."""
    base = get_policy_class("reinforce_demo")

    @register_policy("reinforce_epsilon_test")
    class EpsilonReinforce(base):
        def _monitor_vars_collect(self):
            return ["epsilon"]

        def _forward_collect(self, obs, envstep):
            out = super()._forward_collect(obs, envstep)
            k, step = divmod(envstep // NUM_ENVS, ROLLOUT)
            if k % 2 == 0 and step < 2:
                out["epsilon"] = k + 0.5 * step
            return out

    return EpsilonReinforce


def expected_windows(iterations, log_freq, window):
    """Naive reference: the value list recorded at each tick (tick k = iteration k + 1), window means."""
    recorded = {k: [k, k + 0.5] for k in range(iterations) if k % 2 == 0}
    means = {}
    for log in range(log_freq, iterations + 1, log_freq):
        values = [v for tick in range(log - window, log) for v in recorded.get(tick, [])]
        means[log] = sum(values) / len(values) if values else None
    return means


def test_sparse_collect_key_reaches_table_and_both_tensorboard_axes(tmp_path, caplog):
    load_config(EXAMPLE)  # registers reinforce_demo
    epsilon_reinforce()
    iterations, log_freq = 9, 3
    cfg = load_config(EXAMPLE, [
        f"env.num_envs={NUM_ENVS}", f"policy.rollout_steps={ROLLOUT}", "policy.hidden=8",
        f"train.max_env_steps={iterations * STEPS_PER_ITER}", f"learner.log_freq={log_freq}",
        "eval.freq=none", "checkpoint.freq=none", "policy.type=reinforce_epsilon_test",
    ])
    with caplog.at_level(logging.INFO):
        result = train(cfg, work_dir=tmp_path)
    assert result.train_iter == iterations

    want = expected_windows(iterations, log_freq, window=log_freq)
    assert want == {3: 1.25, 6: 4.25, 9: 7.25}  # (0, .5, 2, 2.5) at 3; (4, 4.5) at 6; (6, 6.5, 8, 8.5) at 9

    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    assert got["collector_iter/epsilon_avg"] == [(log, want[log]) for log in (3, 6, 9)]
    assert got["collector_step/epsilon_avg"] == [(log * STEPS_PER_ITER, want[log]) for log in (3, 6, 9)]

    log = result.log_file.read_text()
    shown = [cells["collector/epsilon_avg"] for cells in parse_log_tables(log) if "collector/epsilon_avg" in cells]
    assert shown == ["1.25", "4.25", "7.25"]
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert not [m for m in messages if "epsilon" in m]  # declared and reported: no warning
