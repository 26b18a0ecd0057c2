"""EvalHook on its own: when it evaluates (freq boundaries, None), stop_value, what it reports (log, table,
TensorBoard), the multi-process broadcast, its state through a real checkpoint, the best model (best.pt),
patience, evaluations.jsonl, resume, and when videos are recorded."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import Policy
from rlearn.checkpoint import read_checkpoint
from rlearn.hooks import EvalHook, EvalState, Hook, HookManager
from rlearn.hooks.eval import EVAL_TB_KEYS, EvalProgress, read_evaluations
from rlearn.learner import BaseLearner
from rlearn.writers import Writer
from rlearn.writers.base import WriterFanout
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

    write_scalars = BaseLearner.write_scalars

    def __init__(self, rank: int = 0, world_size: int = 1, writer: Optional[FakeWriter] = None) -> None:
        super().__init__()
        self.train_iter = 0
        self.envstep = 0
        self.rank, self.world_size = rank, world_size
        self.logger = logging.getLogger("rlearn.test.eval_hook")
        self.logger.setLevel(logging.INFO)
        self.metrics = SimpleNamespace(writers=WriterFanout([writer] if writer is not None else [], self.logger))
        self.writers = self.metrics.writers.writers


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
    learner.register_state("run", RunState(1, hook.state))
    return learner, hook


def test_state_round_trip_through_a_checkpoint(tmp_path):
    learner, hook = learner_with_hook(tmp_path / "a", returns=[-3.25])
    learner.train({}, envstep=45)
    hook.evaluate_if_due(learner)
    path = learner.save_checkpoint()
    saved = torch.load(path, weights_only=False)
    # stored as the run's checkpoints always stored it: in states["run"], not as a hook entry
    assert {k: saved["states"]["run"][k] for k in EvalState.KEYS} == {
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


# ----------------------------------------------------------------------------------- best and patience
def naive_best(returns: List[float], patience: Optional[int]):
    """Reference: the index of the best (first of the highest non-NaN values seen so far) after each
    evaluation, and the evaluation (index) at which ``patience`` evaluations without improvement ended it."""
    best, best_i, since, bests, stop_at = None, None, 0, [], None
    for i, value in enumerate(returns):
        if value == value and (best is None or value > best):
            best, best_i, since = value, i, 0
        else:
            since += 1
        bests.append(best_i)
        if patience is not None and since >= patience:
            stop_at = i
            break
    return bests, stop_at


@settings(max_examples=80, deadline=None)
@given(returns=st.lists(st.one_of(st.sampled_from([0.0, 1.0, 2.0, -1.0]), st.floats(-5, 5), st.just(float("nan"))),
                        min_size=1, max_size=25),
       patience=st.one_of(st.none(), st.integers(1, 5)))
def test_best_and_patience_match_a_naive_reference(returns, patience):
    hook, learner = EvalHook(FakeEvaluator(returns), freq=10, patience=patience), FakeLearner()
    bests, stop_at = naive_best(returns, patience)
    for i in range(len(returns)):
        learner.envstep, learner.train_iter = 10 * (i + 1), i + 1
        stop = hook.evaluate_if_due(learner)
        best_i = bests[i]
        assert hook.progress.best_envstep == (None if best_i is None else 10 * (best_i + 1))
        assert hook.progress.best_iter == (None if best_i is None else best_i + 1)
        assert hook.best_return == (None if best_i is None else returns[best_i])
        assert stop == (i == stop_at)
        assert hook.stop_reason == ("no_improvement" if stop else None)
        if stop:
            break
    assert stop_at is None or hook.evaluator.calls == stop_at + 1


def test_stop_value_wins_over_patience_and_the_log_names_both(caplog):
    hook, learner = EvalHook(FakeEvaluator([3.0, 2.0, 1.0, 9.0]), freq=10, patience=2, stop_value=100), FakeLearner()
    with caplog.at_level(logging.INFO, logger="rlearn.test.eval_hook"):
        stops = [hook.evaluate_if_due(_at(learner, 10 * k)) for k in (1, 2, 3)]
    assert stops == [False, False, True] and hook.stop_reason == "no_improvement"
    assert ("no improvement: 2 evaluations without a new best episode_return_mean (eval.patience 2; best 3 at "
            "envstep 10); stopping") in caplog.text
    hook = EvalHook(FakeEvaluator([3.0, 2.0, 1.0]), freq=10, patience=1, stop_value=2)
    assert hook.evaluate_if_due(_at(FakeLearner(), 10)) is True and hook.stop_reason == "stop_value"


def _at(learner: FakeLearner, envstep: int) -> FakeLearner:
    learner.envstep = envstep
    return learner


def test_other_ranks_keep_the_same_best_and_stop_together(monkeypatch):
    results = iter([({"episode_return_mean": 5.0}, False), ({"episode_return_mean": 4.0}, False)])
    monkeypatch.setattr("rlearn.distributed.broadcast_object", lambda obj: next(results))
    hook, learner = EvalHook(FakeEvaluator(), freq=10, patience=1), FakeLearner(rank=1, world_size=2)
    assert hook.evaluate_if_due(_at(learner, 10)) is False
    assert hook.evaluate_if_due(_at(learner, 20)) is True and hook.stop_reason == "no_improvement"
    assert (hook.progress.best_return, hook.progress.best_envstep) == (5.0, 10)


@pytest.mark.parametrize("kwargs, message", [
    (dict(patience=0), "EvalHook patience must be a positive int or None, got 0"),
    (dict(video_freq=-3), "EvalHook video_freq must be a positive int or None, got -3"),
    (dict(video="yes"), "EvalHook video must be True or False, got 'yes'"),
    (dict(save_best=1), "EvalHook save_best must be True or False, got 1"),
])
def test_bad_new_arguments_name_the_argument(kwargs, message):
    assert str(pytest.raises(ValueError, EvalHook, FakeEvaluator(), **kwargs).value) == message


# ------------------------------------------------------------------------------ best.pt, jsonl, resume
class EpisodeEvaluator(FakeEvaluator):
    """A FakeEvaluator that also exposes per-episode numbers (like rlearn.collect.Evaluator)."""

    def evaluate(self) -> Dict[str, float]:
        result = super().evaluate()
        value = result["episode_return_mean"]
        self.episodes = [{"episode_return": value - 1, "episode_length": 3, "env_index": 0},
                         {"episode_return": value + 1, "episode_length": 4, "env_index": 0}]
        return result


def learner_with_best(work_dir: Path, returns, **kwargs):
    learner = BaseLearner(TinyPolicy(None, None, None), {"log_freq": 5}, work_dir=work_dir)
    hook = EvalHook(EpisodeEvaluator(returns), freq=10, **kwargs)
    learner.register_hook(hook)
    learner.register_state("run", RunState(1, hook.state))
    return learner, hook


def weights(policy) -> torch.Tensor:
    return policy.net.weight.detach().clone()


def evaluate_at(learner, hook, envstep: int) -> bool:
    """Set the weights to a value that identifies the envstep, then evaluate there."""
    learner.envstep = envstep
    with torch.no_grad():
        learner.policy.net.weight.fill_(float(envstep))
    return hook.evaluate_if_due(learner)


def test_best_pt_holds_the_policy_of_the_best_evaluation(tmp_path):
    learner, hook = learner_with_best(tmp_path, [1.0, 3.0, 2.0, 3.0, 0.5])
    for envstep in (10, 20, 30, 40, 50):
        evaluate_at(learner, hook, envstep)
    best = read_checkpoint(tmp_path / "ckpt" / "best.pt")
    assert best["envstep"] == 20  # the tie at 40 keeps the earlier one
    assert torch.equal(best["policy"]["modules"]["net"]["weight"], torch.full((1, 2), 20.0))
    assert best["eval_progress"] == {"best_return": 3.0, "best_envstep": 20, "best_iter": 0, "evals_since_best": 0,
                                     "last_video_envstep": None}
    assert best["states"]["run"]["last_eval"]["episode_return_mean"] == 3.0
    assert not (tmp_path / "ckpt" / "latest.pt").exists()  # best.pt is written alone
    rows = read_evaluations(tmp_path / "evaluations.jsonl")
    assert [(r["envstep"], r["train_iter"], r["returns"], r["lengths"]) for r in rows] == [
        (e, 0, [v - 1, v + 1], [3, 4]) for e, v in zip((10, 20, 30, 40, 50), (1.0, 3.0, 2.0, 3.0, 0.5))]


def test_save_best_false_writes_no_file_but_keeps_counting(tmp_path):
    learner, hook = learner_with_best(tmp_path, [1.0, 3.0], save_best=False)
    evaluate_at(learner, hook, 10)
    evaluate_at(learner, hook, 20)
    assert not (tmp_path / "ckpt" / "best.pt").exists() and hook.progress.best_envstep == 20


def test_resume_keeps_the_best_and_the_patience_count(tmp_path):
    learner, hook = learner_with_best(tmp_path / "a", [1.0, 3.0, 2.0], patience=3)
    for envstep in (10, 20, 30):
        evaluate_at(learner, hook, envstep)
    path = learner.save_checkpoint()
    # a resumed run: the next evaluations are worse (2.5, 2.9): the second one uses up the patience
    again, fresh = learner_with_best(tmp_path / "a", [2.5, 2.9], patience=3)
    again.load_checkpoint(path)
    assert fresh.progress.state_dict() == hook.progress.state_dict()
    assert (fresh.progress.best_return, fresh.progress.best_envstep, fresh.progress.evals_since_best) == (3.0, 20, 1)
    assert evaluate_at(again, fresh, 40) is False
    assert evaluate_at(again, fresh, 50) is True and fresh.stop_reason == "no_improvement"
    best = read_checkpoint(tmp_path / "a" / "ckpt" / "best.pt")
    assert best["envstep"] == 20 and torch.equal(best["policy"]["modules"]["net"]["weight"], torch.full((1, 2), 20.0))


def test_resume_rewinds_evaluations_jsonl_and_sets_aside_a_later_best(tmp_path, caplog):
    learner, hook = learner_with_best(tmp_path, [1.0, 2.0, 5.0])
    evaluate_at(learner, hook, 10)
    evaluate_at(learner, hook, 20)
    path = learner.save_checkpoint(tmp_path / "ckpt" / "at20.pt")
    evaluate_at(learner, hook, 30)  # a new best after the checkpoint, then the run crashes
    with open(tmp_path / "evaluations.jsonl", "a") as handle:
        handle.write('{"envstep": 40, "train_')  # torn by the crash
    again, fresh = learner_with_best(tmp_path, [4.0])
    with caplog.at_level(logging.INFO):
        again.load_checkpoint(path)
    assert [r["envstep"] for r in read_evaluations(tmp_path / "evaluations.jsonl")] == [10, 20]
    assert (tmp_path / "evaluations.jsonl").read_text().endswith("}\n")
    assert read_checkpoint(tmp_path / "ckpt" / "best_rewound_envstep30.pt")["envstep"] == 30
    assert not (tmp_path / "ckpt" / "best.pt").exists()
    assert "best_rewound_envstep30.pt" in caplog.text and "dropped 1 evaluation(s) after envstep 20" in caplog.text
    evaluate_at(again, fresh, 30)  # the resumed run's own evaluation at 30 (4.0 > 2.0): a new best.pt
    assert read_checkpoint(tmp_path / "ckpt" / "best.pt")["eval_progress"]["best_return"] == 4.0
    assert [r["envstep"] for r in read_evaluations(tmp_path / "evaluations.jsonl")] == [10, 20, 30]


def test_a_checkpoint_without_progress_starts_with_no_best(tmp_path):
    """Checkpoints written before EvalProgress existed have no ``eval_progress`` entry."""
    learner, hook = learner_with_best(tmp_path / "a", [7.0])
    evaluate_at(learner, hook, 10)
    path = learner.save_checkpoint()
    raw = torch.load(path, weights_only=True)
    del raw["eval_progress"]
    torch.save(raw, path)
    again, fresh = learner_with_best(tmp_path / "b", [1.0])
    again.load_checkpoint(path)
    assert fresh.progress.best_return is None and fresh.state.last_envstep == 10


def test_eval_progress_refuses_other_keys():
    with pytest.raises(ValueError, match=r"evaluation progress: expected keys \['best_envstep', 'best_iter', "
                                         r"'best_return', 'evals_since_best', 'last_video_envstep'\], got \['best'\]"):
        EvalProgress().load_state_dict({"best": 1})


# ------------------------------------------------------------------------------------------- videos
class FakeRecorder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: List[tuple] = []
        self.fail = fail

    def record(self, path, k=0):
        self.calls.append((Path(path).name, k))
        if self.fail:
            raise RuntimeError("no display")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"mp4")
        from rlearn.video import EpisodeVideo

        return EpisodeVideo(Path(path), 3, 1.5, 2, (4, 6))


class PathSeen(Hook):
    """What a writer sees: the hook's video_path when the evaluation is reported (after_eval here)."""

    def __init__(self, hook: EvalHook, seen: list) -> None:
        self.hook, self.seen = hook, seen

    def after_eval(self, learner) -> None:
        self.seen.append(None if self.hook.video_path is None else self.hook.video_path.name)


@pytest.mark.parametrize("video_freq, expected", [
    (None, [10, 20, 35, 50, 61]),
    (20, [20, 50, 61]),  # the first evaluation after 20, 40 (at 50), 60
])
def test_videos_follow_video_freq(tmp_path, video_freq, expected):
    hook, learner = EvalHook(FakeEvaluator(), freq=10, video=True, video_freq=video_freq, save_best=False), FakeLearner()
    learner.work_dir = tmp_path
    hook.recorder = FakeRecorder()
    seen: list = []
    learner.register_hook(PathSeen(hook, seen))
    for envstep in (10, 20, 35, 50, 61):
        hook.evaluate_if_due(_at(learner, envstep))
    assert [k for _, k in hook.recorder.calls] == expected
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == [f"envstep_{e:010d}.mp4" for e in expected]
    assert seen == [f"envstep_{e:010d}.mp4" if e in expected else None for e in (10, 20, 35, 50, 61)]
    assert hook.progress.last_video_envstep == expected[-1]


def test_a_failing_video_is_reported_once_and_switched_off(tmp_path, caplog):
    hook, learner = EvalHook(FakeEvaluator(), freq=10, video=True, save_best=False), FakeLearner()
    learner.work_dir = tmp_path
    hook.recorder = FakeRecorder(fail=True)
    with caplog.at_level(logging.INFO, logger="rlearn.test.eval_hook"):
        hook.evaluate_if_due(_at(learner, 10))
        hook.evaluate_if_due(_at(learner, 20))
    assert hook.recorder.calls == [("envstep_0000000010.mp4", 10)] and hook.video is False
    assert "video at envstep 10 failed (RuntimeError: no display); no more videos in this run" in caplog.text
    assert hook.state.last_envstep == 20  # the evaluations went on


def test_video_without_a_recorder_is_a_clear_error(tmp_path):
    learner = FakeLearner()
    learner.work_dir = tmp_path
    with pytest.raises(ValueError, match=r"EvalHook\(video=True\) has no recorder"):
        EvalHook(FakeEvaluator(), freq=10, video=True, save_best=False).evaluate(_at(learner, 10))


# --------------------------------------------------------------------------------------- in a run
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "custom_policy.py")


def reinforce_cfg(*overrides: str) -> dict:
    """The custom REINFORCE example on CartPole: 2 envs x 16 steps = 32 env steps per iteration."""
    from rlearn.config import load_config

    return load_config(EXAMPLE, [
        "env.num_envs=2", "policy.rollout_steps=16", "policy.baseline_every=2", "policy.hidden=8",
        "train.max_env_steps=192", "learner.log_freq=3", "eval.freq=64", "eval.episodes=2", "eval.num_envs=2",
        "eval.stop_value=none", "checkpoint.freq=4", *overrides,
    ])


def tb_points(tb_dir: Path, tag: str) -> List[tuple]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_a_run_keeps_raw_numbers_best_and_resumes_without_duplicate_rows(tmp_path):
    from rlearn.run import summary_lines, train

    cfg = reinforce_cfg()
    result = train(cfg, work_dir=tmp_path)
    rows = read_evaluations(tmp_path / "evaluations.jsonl")
    assert [(r["envstep"], r["train_iter"]) for r in rows] == [(64, 2), (128, 4), (192, 6)]
    means = [float(np.mean(r["returns"])) for r in rows]
    assert all(len(r["returns"]) == len(r["lengths"]) == 2 for r in rows)
    # the raw numbers are the ones behind the TensorBoard means
    assert tb_points(tmp_path / "tb", "evaluator_step/episode_return_mean") == [
        (r["envstep"], pytest.approx(m)) for r, m in zip(rows, means)]
    best_i = max(range(3), key=lambda i: (means[i], -i))
    assert result.best_eval == {"episode_return_mean": means[best_i], "envstep": rows[best_i]["envstep"],
                                "train_iter": rows[best_i]["train_iter"]}
    assert result.best_checkpoint == tmp_path / "ckpt" / "best.pt"
    assert read_checkpoint(result.best_checkpoint)["envstep"] == rows[best_i]["envstep"]
    line = f"  best:        {tmp_path / 'ckpt' / 'best.pt'}    (eval return {means[best_i]:.4g} at envstep "
    assert any(text.startswith(line) for text in summary_lines(result))

    # resume from the checkpoint of iteration 4 (envstep 128, taken before that envstep's evaluation)
    train(cfg, work_dir=tmp_path, resume=tmp_path / "ckpt" / "iteration_4.pt")
    rows = read_evaluations(tmp_path / "evaluations.jsonl")
    steps = [r["envstep"] for r in rows]
    assert steps == sorted(set(steps)) and steps[0] == 64 and steps[-1] == 192
    assert steps == [s for s, _ in tb_points(tmp_path / "tb", "evaluator_step/episode_return_mean")]


def test_patience_stops_a_run_with_no_improvement(tmp_path):
    from rlearn.run import summary_lines, train

    result = train(reinforce_cfg("eval.freq=32", "eval.patience=1", "train.max_env_steps=640"), work_dir=tmp_path)
    rows = read_evaluations(tmp_path / "evaluations.jsonl")
    means = [float(np.mean(r["returns"])) for r in rows]
    bests, stop_at = naive_best(means, 1)
    assert stop_at == len(rows) - 1 and result.envstep == rows[-1]["envstep"] < 640
    assert result.stop_reason == "no_improvement"
    assert summary_lines(result)[0].startswith(f"reinforce_cartpole: stopped (no_improvement) at train_iter "
                                               f"{result.train_iter}, envstep {result.envstep}")
    assert result.best_eval["envstep"] == rows[bests[-1]]["envstep"]


def test_a_run_records_playable_videos(tmp_path, caplog):
    imageio = pytest.importorskip("imageio.v2")
    pytest.importorskip("imageio_ffmpeg")
    pytest.importorskip("pygame")
    from rlearn.run import train

    cfg = reinforce_cfg("eval.video=true", "eval.video_freq=128")
    with caplog.at_level(logging.INFO):
        result = train(cfg, work_dir=tmp_path)
    log = result.log_file.read_text()  # the run's logger need not propagate to caplog
    videos = sorted((tmp_path / "videos").iterdir())
    assert [v.name for v in videos] == ["envstep_0000000128.mp4"]  # evaluations at 64, 128, 192
    import re

    length = int(re.search(r"video: \S+envstep_0000000128\.mp4 \(episode return \S+, (\d+) steps\)", log).group(1))
    reader = imageio.get_reader(videos[0])
    try:
        assert reader.count_frames() == length + 1  # the first observation, then one frame per step
        assert reader.get_data(0).shape == (400, 600, 3)  # CartPole's 600x400 frames, not resized
        assert reader.get_meta_data()["fps"] == 50  # CartPole's render_fps
    finally:
        reader.close()
    # the same episode in TensorBoard's Images dashboard: an animated GIF at the evaluation's env step
    import io

    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"images": 0})
    acc.Reload()
    assert acc.Tags()["images"] == ["evaluator_step/video"]
    (event,) = acc.Images("evaluator_step/video")
    assert (event.step, event.height, event.width) == (128, 134, 200)  # 600x400 shrunk by 3 (<= 256 a side)
    gif = Image.open(io.BytesIO(event.encoded_image_string))
    durations = []
    for index in range(gif.n_frames):  # Pillow merges identical consecutive frames, adding their durations
        gif.seek(index)
        durations.append(gif.info["duration"])
    assert gif.format == "GIF" and sum(durations) == 20 * (length + 1)  # every frame, at CartPole's 50 fps


def test_video_without_the_extra_fails_at_start_up(tmp_path, monkeypatch):
    import importlib

    from rlearn.config import ConfigError
    from rlearn.run import Trainer

    real = importlib.import_module

    def without_pygame(name, *args, **kwargs):
        if name == "pygame":
            raise ImportError("No module named 'pygame'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr("rlearn.video.importlib.import_module", without_pygame)
    with pytest.raises(ConfigError) as info:
        Trainer(reinforce_cfg("eval.video=true"), work_dir=tmp_path)
    assert str(info.value) == ("eval.video=True: videos need pygame, which is not installed: pip install "
                               "'rlearn[video]' (imageio, imageio-ffmpeg and pygame)")


def test_last_evaluation_is_published_on_the_message_hub():
    """Other hooks read the last evaluation (and where it was measured) from the learner's hub."""
    from rlearn.logging import MessageHub

    hook, learner = EvalHook(FakeEvaluator([7.0]), freq=10, save_best=False), FakeLearner()
    learner.message_hub = MessageHub.get_instance("rlearn.test.eval_hook.hub")
    learner.envstep, learner.train_iter = 20, 5
    hook.evaluate(learner)
    last = learner.message_hub.get_info("last_eval")
    assert last["episode_return_mean"] == 7.0 and (last["envstep"], last["train_iter"]) == (20, 5)
