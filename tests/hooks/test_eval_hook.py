"""EvalHook on its own: when it evaluates (freq boundaries, None), stop_value, what it reports (log, table,
TensorBoard), the multi-process broadcast, and its state through a real checkpoint."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import Policy
from rlearn.hooks import EvalHook, EvalState, Hook, HookManager
from rlearn.hooks.eval import EVAL_TB_KEYS
from rlearn.learner import BaseLearner
from rlearn.learner.metric_path import MetricPath
from rlearn.writers import Writer
from rlearn.writers.tensorboard import tb_tags
from rlearn.run import RunState


class FakeEvaluator:
    """Returns ``episode_return_mean`` = the next value of ``returns`` (then the last one again)."""

    def __init__(self, returns=(1.0,)) -> None:
        self.returns = list(returns)
        self.calls = 0

    def evaluate(self) -> Dict[str, float]:
        value = self.returns[min(self.calls, len(self.returns) - 1)]
        self.calls += 1
        return {"episode_return_mean": value, "episode_return_std": 0.5, "episode_return_min": value - 1,
                "episode_return_max": value + 1, "episode_length_mean": 20.0, "episodes": 2}


class FakeWriter(Writer):
    """Keeps the TensorBoard points a TensorBoardWriter would write: ``(tag, value, step)``."""

    def __init__(self) -> None:
        self.points: List[tuple] = []
        self.flushes = 0

    def write_scalars(self, scalars, step_iter: int, step_env: int) -> None:
        for name, value in scalars.items():
            iter_tag, step_tag = tb_tags(name)
            self.points += [(iter_tag, value, step_iter), (step_tag, value, step_env)]

    def write_text(self, tag: str, text: str, step_iter: int) -> None:
        pass

    def flush(self) -> None:
        self.flushes += 1


class FakeLearner(HookManager):
    """What EvalHook reads from a learner: counters, rank, logger, writers (through write_scalars), call_hook."""

    write_scalars = MetricPath.write_scalars

    def __init__(self, rank: int = 0, world_size: int = 1, writer: Optional[FakeWriter] = None) -> None:
        super().__init__()
        self.train_iter = 0
        self.envstep = 0
        self.rank, self.world_size = rank, world_size
        self.logger = logging.getLogger("rlearn.test.eval_hook")
        self.logger.setLevel(logging.INFO)
        self.writers = [writer] if writer is not None else []


class Order(Hook):
    def __init__(self, log: list) -> None:
        self.log = log

    def before_eval(self, learner) -> None:
        self.log.append(("before_eval", learner.envstep))

    def after_eval(self, learner) -> None:
        self.log.append(("after_eval", learner.envstep))


def fired_at(hook: EvalHook, learner: FakeLearner, envsteps: List[int]) -> List[int]:
    fired = []
    for envstep in envsteps:
        learner.envstep = envstep
        if hook.due(learner):
            hook.evaluate(learner)
            fired.append(envstep)
    return fired


# --------------------------------------------------------------------------------------------- when
def test_evaluates_when_a_multiple_of_freq_is_crossed():
    hook, learner = EvalHook(FakeEvaluator(), freq=30), FakeLearner()
    # chunks of env steps: 30 exactly, a jump over 60 and 90 (one evaluation), then 120
    assert fired_at(hook, learner, [0, 10, 29, 30, 31, 59, 95, 119, 120, 121]) == [30, 95, 120]
    assert (hook.state.last_envstep, hook.evaluator.calls) == (120, 3)


@settings(max_examples=60, deadline=None)
@given(freq=st.integers(1, 50), chunks=st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_due_matches_a_naive_reference(freq, chunks):
    """Evaluate after a chunk exactly when some multiple of freq lies in (last evaluation, envstep]."""
    envsteps = list(np.cumsum(chunks).tolist())
    expected, last = [], 0
    for envstep in envsteps:
        if any(last < k * freq <= envstep for k in range(1, envstep // freq + 1)):
            expected.append(envstep)
            last = envstep
    assert fired_at(EvalHook(FakeEvaluator(), freq=freq), FakeLearner(), envsteps) == expected


def test_no_evaluation_with_freq_none_except_at_the_end():
    hook, learner = EvalHook(FakeEvaluator(), freq=None), FakeLearner()
    assert fired_at(hook, learner, [10, 1000, 10**6]) == []
    assert hook.evaluate_if_due(learner) is False and hook.evaluator.calls == 0
    hook.evaluate_at_end(learner)
    assert hook.evaluator.calls == 1 and hook.state.last_envstep == 10**6
    hook.evaluate_at_end(learner)  # already evaluated at this envstep
    assert hook.evaluator.calls == 1


def test_evaluate_at_end_skips_an_evaluation_at_the_same_envstep():
    hook, learner = EvalHook(FakeEvaluator(), freq=30), FakeLearner()
    learner.envstep = 60
    assert hook.evaluate_if_due(learner) is False  # evaluated, no stop_value
    hook.evaluate_at_end(learner)
    assert hook.evaluator.calls == 1
    learner.envstep = 64
    hook.evaluate_at_end(learner)
    assert hook.evaluator.calls == 2 and hook.state.last_envstep == 64


# ----------------------------------------------------------------------------------------- stop_value
def test_stop_value_is_reached_at_or_above(caplog):
    hook, learner = EvalHook(FakeEvaluator([1.0, 4.99, 5.0, 7.0]), freq=10, stop_value=5), FakeLearner()
    stops = []
    for envstep in (10, 20, 30, 40):
        learner.envstep = envstep
        with caplog.at_level(logging.INFO, logger="rlearn.test.eval_hook"):
            stops.append(hook.evaluate_if_due(learner))
    assert stops == [False, False, True, True]
    assert "stop_value reached: episode_return_mean 5 >= eval.stop_value 5 at envstep 30; stopping" in caplog.text
    assert hook.last_return == 7.0


def test_without_stop_value_never_stops():
    hook, learner = EvalHook(FakeEvaluator([1e30]), freq=1), FakeLearner()
    learner.envstep = 5
    assert hook.evaluate(learner) is False


@pytest.mark.parametrize("kwargs, message", [
    (dict(freq=0), "EvalHook freq must be a positive int or None, got 0"),
    (dict(freq=True), "EvalHook freq must be a positive int or None, got True"),
    (dict(stop_value="high"), "EvalHook stop_value must be a number or None, got 'high'"),
])
def test_bad_arguments_name_the_argument(kwargs, message):
    assert str(pytest.raises(ValueError, EvalHook, FakeEvaluator(), **kwargs).value) == message


def test_without_an_evaluator_is_a_clear_error():
    with pytest.raises(ValueError, match="EvalHook has no evaluator"):
        EvalHook(freq=10).evaluate(FakeLearner())


# ------------------------------------------------------------------------------------------- report
def test_report_logs_a_line_and_writes_both_tensorboard_axes(caplog):
    writer = FakeWriter()
    hook, learner = EvalHook(FakeEvaluator([12.5]), freq=10), FakeLearner(writer=writer)
    order: list = []
    learner.register_hook(Order(order))
    learner.envstep, learner.train_iter = 30, 11
    with caplog.at_level(logging.INFO, logger="rlearn.test.eval_hook"):
        hook.evaluate(learner)
    assert order == [("before_eval", 30), ("after_eval", 30)]
    assert ("evaluation at envstep 30 (train_iter 11): episode_return 12.5 +- 0.5 (min 11.5, max 13.5) over 2 "
            "episodes, episode_length 20.0") in caplog.text
    expected = [(f"evaluator_{axis}/{key}", value, step) for key, value in zip(EVAL_TB_KEYS, (12.5, 0.5, 11.5, 13.5, 20.0))
                for axis, step in (("iter", 11), ("step", 30))]
    assert writer.points == expected and writer.flushes == 1
    assert hook.state.last_result["episode_return_mean"] == 12.5
    assert (hook.state.last_envstep, hook.state.last_iter) == (30, 11)


# ------------------------------------------------------------------------------------- several ranks
def test_other_ranks_take_rank0s_result_and_decision(monkeypatch):
    sent = {"episode_return_mean": 3.0}
    calls = []

    def broadcast(obj):
        calls.append(obj)
        return (sent, True)

    monkeypatch.setattr("rlearn.distributed.broadcast_object", broadcast)
    hook, learner = EvalHook(FakeEvaluator(), freq=10), FakeLearner(rank=1, world_size=2, writer=FakeWriter())
    learner.envstep = 10
    assert hook.evaluate_if_due(learner) is True
    assert calls == [(None, False)]  # rank 1 plays nothing and sends nothing
    assert hook.evaluator.calls == 0 and learner.writers[0].points == []
    assert hook.state.last_result == sent and hook.state.last_envstep == 10

    rank0 = EvalHook(FakeEvaluator([9.0]), freq=10, stop_value=5.0)
    learner0 = FakeLearner(rank=0, world_size=2)
    learner0.envstep = 10
    calls.clear()
    rank0.evaluate(learner0)
    assert calls[0][0]["episode_return_mean"] == 9.0 and calls[0][1] is True  # rank 0 broadcasts its own


# -------------------------------------------------------------------------------------- checkpoints
class TinyPolicy(Policy):
    default_config: Dict[str, Any] = {}

    def _init_learn(self):
        self.net = torch.nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def _forward_learn(self, data):
        return {"loss": 1.0}

    def _monitor_vars_learn(self):
        return ["loss"]

    def _forward_collect(self, obs, envstep):
        return {"action": np.zeros(len(obs))}

    def _forward_eval(self, obs):
        return np.zeros(len(obs))

    def modules(self):
        return {"net": self.net}

    def optimizers(self):
        return {"opt": self.opt}


def learner_with_hook(work_dir: Path, returns=(1.0,)):
    learner = BaseLearner(TinyPolicy(None, None, None), {"log_freq": 5}, work_dir=work_dir)
    hook = EvalHook(FakeEvaluator(returns), freq=20)
    learner.register_hook(hook)
    learner.register_state("pipeline", RunState(1, hook.state))
    return learner, hook


def test_state_round_trip_through_a_checkpoint(tmp_path):
    learner, hook = learner_with_hook(tmp_path / "a", returns=[-3.25])
    learner.train({}, envstep=45)
    hook.evaluate_if_due(learner)
    path = learner.save_checkpoint()
    saved = torch.load(path, weights_only=False)
    # stored as the run's checkpoints always stored it: in states["pipeline"], not as a hook entry
    assert {k: saved["states"]["pipeline"][k] for k in EvalState.KEYS} == {
        "last_eval_envstep": 45, "last_eval_iter": 1, "last_eval": hook.state.last_result}
    assert "EvalHook" not in saved["hooks"]

    again, fresh = learner_with_hook(tmp_path / "b")
    again.load_checkpoint(path)
    assert (fresh.state.last_envstep, fresh.state.last_iter) == (45, 1)
    assert fresh.state.last_result == hook.state.last_result and fresh.last_return == -3.25
    again.envstep = 59
    assert not fresh.due(again)  # 45 -> 59 crosses no multiple of 20
    again.envstep = 60
    assert fresh.due(again)


def test_eval_state_refuses_other_keys():
    with pytest.raises(ValueError, match=r"evaluation state: expected keys \['last_eval', 'last_eval_envstep', "
                                         r"'last_eval_iter'\], got \['last_eval'\]"):
        EvalState().load_state_dict({"last_eval": None})


def test_built_from_a_config_by_name():
    from rlearn.hooks import build_hook

    hook, priority = build_hook(dict(type="EvalHook", freq=500, stop_value=195))
    assert isinstance(hook, EvalHook) and (hook.freq, hook.stop_value, hook.evaluator) == (500, 195.0, None)
    assert priority == 50
