"""LRSchedulerHook: exact warmup lrs for each mode (with and without a torch scheduler), as read by the
policy inside ``_forward_learn``; argument validation; resume through state_dict.

A tiny learner built on HookManager runs the iteration protocol of BaseLearner (before_iter hooks,
_forward_learn, train_iter += 1, after_iter hooks), so these tests do not depend on the learner module.
"""

from __future__ import annotations

import io
from typing import Dict, List

import pytest
import torch

from rlearn.hooks import HookManager, LRSchedulerHook, build_hook
from rlearn.hooks.lr_scheduler import warmup_factor

# torch warns when a scheduler steps before its optimizer, or when get_lr() is misused: fail instead
pytestmark = pytest.mark.filterwarnings("error::UserWarning")


class TinyPolicy:
    """Optimizers over one-parameter models; ``_forward_learn`` records the lr of every param group."""

    def __init__(self, lrs: Dict[str, List[float]] | None = None) -> None:
        lrs = lrs or {"main": [0.1]}
        self.opts: Dict[str, torch.optim.Optimizer] = {}
        for name, group_lrs in lrs.items():
            groups = [{"params": [torch.nn.Parameter(torch.ones(1))], "lr": lr} for lr in group_lrs]
            self.opts[name] = torch.optim.SGD(groups, lr=group_lrs[0])
        self.seen: List[Dict[str, List[float]]] = []
        self.fail_next = False

    def optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        return self.opts

    def _forward_learn(self, data) -> dict:
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("boom")
        self.seen.append({name: [g["lr"] for g in opt.param_groups] for name, opt in self.opts.items()})
        for opt in self.opts.values():
            opt.zero_grad()
            loss = sum((p ** 2).sum() for group in opt.param_groups for p in group["params"])
            loss.backward()
            opt.step()
        return {}


class TinyLearner(HookManager):
    def __init__(self, policy: TinyPolicy) -> None:
        super().__init__()
        self.policy = policy
        self.train_iter = 0

    def train(self) -> None:
        self.call_hook("before_iter")
        self.policy._forward_learn(None)
        self.train_iter += 1
        self.call_hook("after_iter")


def run(hook: LRSchedulerHook, n: int, policy: TinyPolicy | None = None, name: str = "main") -> List[float]:
    """Register ``hook`` on a fresh learner, run ``n`` iterations, return the lr each one used."""
    policy = policy or TinyPolicy()
    learner = TinyLearner(policy)
    learner.register_hook(hook)
    learner.call_hook("before_run")
    for _ in range(n):
        learner.train()
    return [seen[name][0] for seen in policy.seen]


BASE, W, RATIO = 0.1, 4, 0.1
EXPECTED_WARMUP = {
    "constant": [0.01, 0.01, 0.01, 0.01],
    "linear": [0.01, 0.0325, 0.055, 0.0775],  # 0.1 * (1 - (1 - i/4) * 0.9)
    "exp": [0.01, 0.1 * 0.1 ** 0.75, 0.1 * 0.1 ** 0.5, 0.1 * 0.1 ** 0.25],  # 0.1 * 0.1 ** (1 - i/4)
}


@pytest.mark.parametrize("mode", ["constant", "linear", "exp"])
def test_warmup_without_scheduler(mode):
    lrs = run(LRSchedulerHook(warmup=mode, warmup_iters=W, warmup_ratio=RATIO), 7)
    assert lrs == pytest.approx(EXPECTED_WARMUP[mode] + [0.1, 0.1, 0.1], rel=1e-12)


def test_warmup_factor_formulas():
    assert [warmup_factor("linear", i, 4, 0.1) for i in range(5)] == pytest.approx([0.1, 0.325, 0.55, 0.775, 1.0])
    assert warmup_factor("exp", 2, 4, 0.25) == pytest.approx(0.5)
    assert warmup_factor(None, 0, 4, 0.1) == 1.0 and warmup_factor("constant", 4, 4, 0.1) == 1.0


@pytest.mark.parametrize("mode", ["constant", "linear", "exp"])
def test_warmup_on_top_of_step_lr(mode):
    hook = LRSchedulerHook(scheduler=dict(type="StepLR", step_size=2, gamma=0.5), warmup=mode, warmup_iters=W, warmup_ratio=RATIO)
    lrs = run(hook, 8)
    regular = [0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125]  # StepLR, one step per iteration
    factors = [e / 0.1 for e in EXPECTED_WARMUP[mode]] + [1.0] * 4
    assert lrs == pytest.approx([r * f for r, f in zip(regular, factors)], rel=1e-12)
    # the warmup never leaked into the chainable scheduler: it stands where a plain StepLR would
    assert hook.optimizers["main"].param_groups[0]["lr"] == pytest.approx(0.00625, rel=1e-12)
    assert hook.schedulers["main"].last_epoch == 8


def test_exact_linear_warmup_on_step_lr_numbers():
    hook = LRSchedulerHook(scheduler=dict(type="StepLR", step_size=2, gamma=0.5), warmup="linear", warmup_iters=4, warmup_ratio=0.1)
    assert run(hook, 6) == pytest.approx([0.01, 0.0325, 0.0275, 0.03875, 0.025, 0.025], rel=1e-12)


def test_warmup_on_a_scheduler_that_steps_every_iteration():
    hook = LRSchedulerHook(scheduler=dict(type="ExponentialLR", gamma=0.5), warmup="constant", warmup_iters=2, warmup_ratio=0.1)
    assert run(hook, 4) == pytest.approx([0.01, 0.005, 0.025, 0.0125], rel=1e-12)


def test_scheduler_without_warmup_matches_plain_torch():
    lrs = run(LRSchedulerHook(scheduler=dict(type="CosineAnnealingLR", T_max=5)), 6)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    ref = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    expected = []
    for _ in range(6):
        expected.append(opt.param_groups[0]["lr"])
        opt.step()
        ref.step()
    assert lrs == pytest.approx(expected, rel=1e-12)


def test_callable_scheduler_and_several_param_groups():
    hook = LRSchedulerHook(
        scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0 / (epoch + 1)),
        warmup="constant",
        warmup_iters=1,
        warmup_ratio=0.5,
    )
    policy = TinyPolicy({"main": [0.1, 1.0]})
    run(hook, 3, policy)
    assert [seen["main"] for seen in policy.seen] == [
        pytest.approx([0.05, 0.5]),  # warmup: both groups halved
        pytest.approx([0.05, 0.5]),  # LambdaLR: 1/2
        pytest.approx([0.1 / 3, 1.0 / 3]),
    ]


def test_only_the_selected_optimizers():
    policy = TinyPolicy({"actor": [0.1], "critic": [1.0]})
    hook = LRSchedulerHook(scheduler=dict(type="StepLR", step_size=1, gamma=0.5), warmup="constant", warmup_iters=1, warmup_ratio=0.1, optimizers="actor")
    run(hook, 3, policy, name="actor")
    assert [s["actor"][0] for s in policy.seen] == pytest.approx([0.01, 0.05, 0.025])
    assert [s["critic"][0] for s in policy.seen] == [1.0, 1.0, 1.0]
    assert list(hook.schedulers) == ["actor"]


def test_all_optimizers_by_default():
    policy = TinyPolicy({"actor": [0.1], "critic": [1.0]})
    run(LRSchedulerHook(warmup="linear", warmup_iters=2, warmup_ratio=0.5), 3, policy, name="actor")
    assert [s["actor"][0] for s in policy.seen] == pytest.approx([0.05, 0.075, 0.1])
    assert [s["critic"][0] for s in policy.seen] == pytest.approx([0.5, 0.75, 1.0])


def test_a_failed_iteration_does_not_compound_the_warmup():
    policy = TinyPolicy()
    learner = TinyLearner(policy)
    learner.register_hook(LRSchedulerHook(warmup="constant", warmup_iters=3, warmup_ratio=0.1))
    learner.call_hook("before_run")
    learner.train()
    policy.fail_next = True
    with pytest.raises(RuntimeError):
        learner.train()  # before_iter applied the warmup, after_iter never ran
    learner.train()
    learner.train()
    learner.train()
    assert [s["main"][0] for s in policy.seen] == pytest.approx([0.01, 0.01, 0.01, 0.1])


def test_set_up_lazily_without_before_run():
    policy = TinyPolicy()
    learner = TinyLearner(policy)
    learner.register_hook(LRSchedulerHook(scheduler=dict(type="StepLR", step_size=1, gamma=0.5)))
    learner.train()
    learner.train()
    assert [s["main"][0] for s in policy.seen] == pytest.approx([0.1, 0.05])


def test_built_from_a_config_dict():
    hook, priority = build_hook(
        dict(type="LRSchedulerHook", scheduler=dict(type="StepLR", step_size=2, gamma=0.5), warmup="exp", warmup_iters=2, warmup_ratio=0.25)
    )
    assert priority == 50
    # exp warmup: 0.1 * 0.25 ** (1 - i/2) for i = 0, 1; then StepLR: 0.1 * 0.5 ** (i // 2)
    assert run(hook, 4) == pytest.approx([0.025, 0.05, 0.05, 0.05], rel=1e-12)


# ------------------------------------------------------------------------------------------- resume
def _through_a_file(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("load_before_run", [True, False])
@pytest.mark.parametrize(
    "scheduler",
    [dict(type="StepLR", step_size=2, gamma=0.5), dict(type="LambdaLR", lr_lambda=lambda e: 0.5 ** e)],
    ids=["StepLR", "LambdaLR"],
)
def test_resume_mid_warmup_continues_exactly(scheduler, load_before_run):
    def make_hook():
        return LRSchedulerHook(scheduler=scheduler, warmup="linear", warmup_iters=4, warmup_ratio=0.1)

    reference = run(make_hook(), 8)

    policy = TinyPolicy()
    learner = TinyLearner(policy)
    hook = make_hook()
    learner.register_hook(hook)
    learner.call_hook("before_run")
    for _ in range(3):
        learner.train()
    saved_hook = _through_a_file(hook.state_dict())
    saved_opt = _through_a_file(policy.opts["main"].state_dict())

    resumed_policy = TinyPolicy()
    resumed = TinyLearner(resumed_policy)
    resumed_hook = make_hook()
    resumed.register_hook(resumed_hook)
    resumed_policy.opts["main"].load_state_dict(saved_opt)
    resumed.train_iter = 3
    if load_before_run:  # the checkpoint is loaded before the run starts: applied at set-up
        resumed_hook.load_state_dict(saved_hook)
        resumed.call_hook("before_run")
    else:
        resumed.call_hook("before_run")
        resumed_hook.load_state_dict(saved_hook)
    for _ in range(5):
        resumed.train()
    first = [s["main"][0] for s in policy.seen]
    assert first + [s["main"][0] for s in resumed_policy.seen] == pytest.approx(reference, rel=1e-12)


def test_state_dict_holds_the_torch_scheduler_state():
    hook = LRSchedulerHook(scheduler=dict(type="StepLR", step_size=2, gamma=0.5))
    run(hook, 3)
    state = hook.state_dict()
    assert state["schedulers"]["main"]["last_epoch"] == 3
    assert state["schedulers"]["main"]["step_size"] == 2
    assert state["regular_lrs"] == {"main": [pytest.approx(0.05)]}


def test_load_state_dict_refuses_garbage_and_mismatches():
    hook = LRSchedulerHook(scheduler=dict(type="StepLR", step_size=2))
    run(hook, 1)
    with pytest.raises(ValueError, match="not a LRSchedulerHook state"):
        hook.load_state_dict({"foo": 1})
    with pytest.raises(ValueError, match="regular_lrs"):
        hook.load_state_dict({"schedulers": {}, "regular_lrs": {"main": ["x"]}})
    with pytest.raises(ValueError, match=r"missing: \['main'\], unexpected: \['actor'\]"):
        hook.load_state_dict({"schedulers": {"actor": {}}, "regular_lrs": {}})
    good = hook.state_dict()
    with pytest.raises(ValueError, match="saved lrs of optimizer 'main' do not match"):
        hook.load_state_dict({**good, "regular_lrs": {"main": [0.1, 0.2]}})
    assert hook.schedulers["main"].last_epoch == 1  # nothing was applied


# --------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(warmup="cosine", warmup_iters=3), ValueError, "'cosine' is not a supported warmup; valid values: None, 'constant', 'linear', 'exp'"),
        (dict(warmup="linear"), ValueError, "needs warmup_iters > 0"),
        (dict(warmup="linear", warmup_iters=-1), ValueError, "warmup_iters must be an int >= 0"),
        (dict(warmup="linear", warmup_iters=2.5), ValueError, "warmup_iters must be an int"),
        (dict(warmup="linear", warmup_iters=True), ValueError, "warmup_iters must be an int"),
        (dict(warmup_iters=5), ValueError, "without a warmup mode"),
        (dict(warmup="exp", warmup_iters=3, warmup_ratio=0), ValueError, r"warmup_ratio must be a number in \(0, 1\]"),
        (dict(warmup="exp", warmup_iters=3, warmup_ratio=1.5), ValueError, "warmup_ratio"),
        (dict(warmup="exp", warmup_iters=3, warmup_ratio="0.1"), ValueError, "warmup_ratio"),
        (dict(optimizers=[]), ValueError, "optimizers must be"),
        (dict(optimizers=["a", 3]), ValueError, "optimizers must be"),
        (dict(scheduler=dict(type="StepLRR", step_size=1)), ValueError, "unknown scheduler type 'StepLRR'; known types: .*StepLR"),
        (dict(scheduler=dict(type="ReduceLROnPlateau")), ValueError, "needs a validation metric"),
        (dict(scheduler=dict(type="SequentialLR")), ValueError, "pass a callable"),
        (dict(scheduler=dict(step_size=1)), ValueError, "needs 'type'"),
        (dict(scheduler=dict(type="StepLR", step_sise=1)), TypeError, "bad arguments for StepLR"),
        (dict(scheduler=dict(type="StepLR")), TypeError, "bad arguments for StepLR.*step_size"),
        (dict(scheduler=dict(type="StepLR", step_size=1, optimizer=None)), ValueError, "do not put 'optimizer'"),
        (dict(scheduler="StepLR"), TypeError, "scheduler must be None, a dict"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        LRSchedulerHook(**kwargs)


def test_set_up_errors_name_the_policy_and_optimizers():
    policy = TinyPolicy({"actor": [0.1], "critic": [0.1]})
    learner = TinyLearner(policy)
    learner.register_hook(LRSchedulerHook(optimizers=["actor", "critc"]))
    with pytest.raises(KeyError, match="policy TinyPolicy has no optimizer 'critc'; its optimizers: actor, critic"):
        learner.call_hook("before_run")
    empty = TinyPolicy({})
    empty.opts = {}
    learner = TinyLearner(empty)
    learner.register_hook(LRSchedulerHook())
    with pytest.raises(ValueError, match="has no optimizers"):
        learner.call_hook("before_run")


def test_a_factory_that_returns_no_scheduler():
    learner = TinyLearner(TinyPolicy())
    learner.register_hook(LRSchedulerHook(scheduler=lambda opt: None))
    with pytest.raises(TypeError, match="has no step"):
        learner.call_hook("before_run")


def test_an_optimizer_that_skips_the_first_iteration_does_not_warn():
    """TD3's actor optimizer steps every other iteration: the scheduler's first step comes before the
    optimizer's, which torch would warn about (the module turns UserWarnings into errors)."""

    class DelayedPolicy(TinyPolicy):
        def _forward_learn(self, data):
            self.seen.append({"main": [self.opts["main"].param_groups[0]["lr"]]})
            if len(self.seen) % 2 == 0:
                opt = self.opts["main"]
                opt.zero_grad()
                sum((p ** 2).sum() for g in opt.param_groups for p in g["params"]).backward()
                opt.step()
            return {}

    lrs = run(LRSchedulerHook(scheduler=dict(type="StepLR", step_size=1, gamma=0.5)), 4, DelayedPolicy())
    assert lrs == pytest.approx([0.1, 0.05, 0.025, 0.0125])
