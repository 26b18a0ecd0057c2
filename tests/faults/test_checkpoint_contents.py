"""A checkpoint whose digest is valid but whose content does not fit the run (an optimizer state of the
wrong shape, a writer's state of the wrong type) is refused before anything is loaded: torch's
``Optimizer.load_state_dict`` checks none of it, and a wrong-shaped Adam moment crashes the process at the
next step (segfault or heap corruption)."""

from __future__ import annotations

import copy
import logging

import pytest
import torch

from policies.base import Policy
from rlearn.checkpoint import CheckpointError, read_checkpoint, serialize_checkpoint
from rlearn.checkpoint.fit import optimizer_problems
from rlearn.fileio import atomic_write_bytes
from rlearn.learner import BaseLearner


class TwoLayerPolicy(Policy):
    """Two networks, a fused Adam (the kernel that crashed) and an SGD with momentum."""

    def _init_learn(self):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.actor = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
            self.critic = torch.nn.Linear(4, 1)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3, fused=True)
        self.critic_opt = torch.optim.SGD(self.critic.parameters(), lr=1e-2, momentum=0.9)

    def _forward_learn(self, data):
        for net, opt, width in ((self.actor, self.actor_opt, 3), (self.critic, self.critic_opt, 4)):
            loss = net(torch.ones(2, width)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return {"loss": loss.detach()}

    def _monitor_vars_learn(self):
        return ["loss"]

    def _forward_collect(self, obs, envstep):
        return {"action": obs}

    def _forward_eval(self, obs):
        return obs

    def modules(self):
        return {"actor": self.actor, "critic": self.critic}

    def optimizers(self):
        return {"actor": self.actor_opt, "critic": self.critic_opt}


def _learner(work_dir, writers=("jsonl",)):
    policy = TwoLayerPolicy(None, None, None, seed=0)
    return BaseLearner(policy, dict(log_freq=2, writers=list(writers)), work_dir=work_dir,
                       logger=logging.getLogger("rlearn.test.contents"))


@pytest.fixture
def saved(tmp_path):
    learner = _learner(tmp_path / "run", writers=("jsonl", "csv", "tensorboard"))
    for i in range(4):
        learner.train(None, envstep=i + 1)
    path = learner.save_checkpoint()
    learner.close()
    return path


def _rewritten(path, change):
    """The checkpoint with ``change(checkpoint)`` applied, written with a valid digest."""
    checkpoint = read_checkpoint(path)
    change(checkpoint)
    out = path.with_name("changed.pt")
    atomic_write_bytes(out, serialize_checkpoint(checkpoint))
    return out


def _adam(ck):
    return ck["policy"]["optimizers"]["actor"]


def _sgd(ck):
    return ck["policy"]["optimizers"]["critic"]


OPTIMIZER_DAMAGE = {
    "exp_avg of the wrong shape": (
        lambda ck: _adam(ck)["state"][0].update(exp_avg=torch.zeros(3)),
        r"optimizer 'actor': parameter 0 \(group 0, shape \(8, 3\)\): exp_avg has shape \(3,\), the optimizer "
        r"needs \(8, 3\)"),
    "exp_avg_sq of another dtype": (
        lambda ck: _adam(ck)["state"][1].update(exp_avg_sq=torch.zeros(8, dtype=torch.float64)),
        r"parameter 1 \(group 0, shape \(8,\)\): exp_avg_sq has dtype torch.float64, the optimizer needs torch.float32"),
    "a negative step": (
        lambda ck: _adam(ck)["state"][2].update(step=torch.tensor(-4.0)),
        r"parameter 2 .*: step must be a count >= 0"),
    "a step that is not a scalar": (
        lambda ck: _adam(ck)["state"][2].update(step=torch.ones(3)),
        r"parameter 2 .*: step must be a count >= 0"),
    "momentum buffer of the wrong shape": (
        lambda ck: _sgd(ck)["state"][0].update(momentum_buffer=torch.zeros(1, 5)),
        r"optimizer 'critic': parameter 0 \(group 0, shape \(1, 4\)\): momentum_buffer has shape \(1, 5\)"),
    "a state for an unknown parameter": (
        lambda ck: _adam(ck)["state"].update({9: {"step": torch.tensor(1.0)}}),
        r"optimizer 'actor': state for parameter 9, which no param group lists"),
    "a group with a parameter too few": (
        lambda ck: _adam(ck)["param_groups"][0].update(params=[0, 1, 2]),
        r"optimizer 'actor': param group 0 has 3 parameter\(s\) in the checkpoint, 4 in the policy"),
    "an lr that is a string": (
        lambda ck: _adam(ck)["param_groups"][0].update(lr="0.001"),
        r"param group 0: lr must be a finite number like the optimizer's 0.001, got '0.001'"),
    "a NaN lr": (
        lambda ck: _adam(ck)["param_groups"][0].update(lr=float("nan")),
        r"param group 0: lr must be a finite number"),
    "a negative eps": (
        lambda ck: _adam(ck)["param_groups"][0].update(eps=-1e-8),
        r"param group 0: eps must be >= 0, got -1e-08"),
    "betas of the wrong length": (
        lambda ck: _adam(ck)["param_groups"][0].update(betas=(0.9,)),
        r"param group 0: betas must be 2 finite numbers like the optimizer's \(0.9, 0.999\), got \(0.9,\)"),
    "a missing lr": (
        lambda ck: _adam(ck)["param_groups"][0].pop("lr"),
        r"param group 0 has no 'lr' in the checkpoint"),
    "amsgrad switched on without its state": (
        lambda ck: _adam(ck)["param_groups"][0].update(amsgrad=True),
        r"optimizer 'actor': a step with the checkpoint's settings needs state entry 'max_exp_avg_sq', which the "
        r"checkpoint lacks"),
    "a missing optimizer": (
        lambda ck: ck["policy"]["optimizers"].pop("critic"),
        r"optimizer 'critic' missing from the checkpoint"),
}


@pytest.mark.parametrize("damage", sorted(OPTIMIZER_DAMAGE))
def test_optimizer_state_that_does_not_fit_is_refused_before_anything_is_loaded(tmp_path, saved, damage):
    change, message = OPTIMIZER_DAMAGE[damage]
    path = _rewritten(saved, change)
    learner = _learner(tmp_path / "other")
    before = {name: copy.deepcopy(net.state_dict()) for name, net in learner.policy.modules().items()}
    optimizer_before = copy.deepcopy(learner.policy.actor_opt.state_dict())
    with pytest.raises(CheckpointError, match=rf"checkpoint {path} does not fit policy TwoLayerPolicy: .*{message}"):
        learner.load_checkpoint(path)
    assert learner.train_iter == 0
    for name, net in learner.policy.modules().items():  # nothing was loaded
        assert all(torch.equal(before[name][k], v) for k, v in net.state_dict().items())
    assert learner.policy.actor_opt.state_dict() == optimizer_before


def test_a_fitting_optimizer_state_loads_and_steps(tmp_path, saved):
    learner = _learner(tmp_path / "other")
    learner.load_checkpoint(saved, rewind_tensorboard=False)
    learner.train(None, envstep=5)  # a step on the loaded moments (the fused kernel)
    assert learner.train_iter == 5


def test_optimizer_check_compares_with_the_live_state_once_the_optimizer_has_stepped():
    net = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(net.parameters())
    net(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    state = optimizer.state_dict()
    assert optimizer_problems("opt", state, optimizer) == []
    extra = copy.deepcopy(state)
    extra["state"][0]["max_exp_avg_sq"] = torch.zeros(2, 2)
    assert optimizer_problems("opt", extra, optimizer) == [
        "optimizer 'opt': parameter 0 (group 0, shape (2, 2)): state entries ['exp_avg', 'exp_avg_sq', "
        "'max_exp_avg_sq', 'step'] in the checkpoint, ['exp_avg', 'exp_avg_sq', 'step'] in the optimizer"]
    float64_step = copy.deepcopy(state)
    float64_step["state"][1]["step"] = torch.tensor(1.0, dtype=torch.float64)
    assert "step must be a count >= 0" in optimizer_problems("opt", float64_step, optimizer)[0]


WRITER_DAMAGE = {
    "JSONL rows=-3": ("JsonlWriter", lambda s: s.update(rows=-3), r"writer JsonlWriter: its state's 'rows' must be "
                      r"an int >= 0, got -3"),
    "JSONL rows missing": ("JsonlWriter", lambda s: s.pop("rows"), r"writer JsonlWriter: its state has no 'rows'"),
    "CSV rows a float": ("CsvWriter", lambda s: s.update(rows=2.5), r"'rows' must be an int >= 0, got 2.5"),
    "CSV columns not strings": ("CsvWriter", lambda s: s.update(columns=["train_iter", 7]),
                                r"writer CsvWriter: its state's 'columns' item 1 must be a non-empty str, got 7"),
    "TensorBoard point count negative": (
        "TensorBoardWriter", lambda s: s["points"].update({"learner_iter/loss_avg": [4, -1]}),
        r"writer TensorBoardWriter: its state's 'points' entry 'learner_iter/loss_avg' item 1 must be an int >= 0"),
    "TensorBoard totals missing": ("TensorBoardWriter", lambda s: s.pop("totals"),
                                   r"writer TensorBoardWriter: its state has no 'totals'"),
    "TensorBoard points a list": ("TensorBoardWriter", lambda s: s.update(points=[1, 2]),
                                  r"'points' must be a dict, got list"),
}


@pytest.mark.parametrize("damage", sorted(WRITER_DAMAGE))
def test_a_writer_state_of_the_wrong_type_is_refused_before_anything_is_loaded(tmp_path, saved, damage):
    writer, change, message = WRITER_DAMAGE[damage]
    path = _rewritten(saved, lambda ck: change(ck["learner"]["writers"][writer]))
    learner = _learner(tmp_path / "other", writers=("jsonl", "csv", "tensorboard"))
    with pytest.raises(CheckpointError, match=rf"checkpoint {path}: cannot restore .*{message}"):
        learner.load_checkpoint(path)
    assert learner.train_iter == 0
    learner.close()


def test_writers_check_their_state_when_loaded_directly(tmp_path):
    from rlearn.writers import JsonlWriter

    writer = JsonlWriter(tmp_path / "metrics.jsonl")
    with pytest.raises(ValueError, match=r"writer JsonlWriter: its state's 'rows' must be an int >= 0, got -3"):
        writer.load_state_dict({"rows": -3})
    writer.load_state_dict({"rows": 3})
    assert writer.rows_written == 3


def test_scalar_state_entries_and_settings_an_lr_scheduler_adds():
    net = torch.nn.Linear(2, 2)
    optimizer = torch.optim.NAdam(net.parameters())
    state = copy.deepcopy(optimizer.state_dict())
    state["state"] = {0: {"step": torch.tensor(2.0), "mu_product": torch.tensor(0.9),
                          "exp_avg": torch.zeros(2, 2), "exp_avg_sq": torch.zeros(2, 2)}}
    assert optimizer_problems("opt", state, optimizer) == []
    state["state"][0]["exp_avg"] = torch.tensor(0.0)  # a 0-dim moment for a (2, 2) parameter
    state["state"][0]["mu_product"] = torch.ones(2)
    assert optimizer_problems("opt", state, optimizer) == [
        "optimizer 'opt': parameter 0 (group 0, shape (2, 2)): mu_product must be a finite 0-dim floating-point "
        "tensor, got tensor([1., 1.])",
        "optimizer 'opt': parameter 0 (group 0, shape (2, 2)): exp_avg has shape (), the optimizer needs (2, 2)"]
    # a checkpoint of a run without an LR scheduler resumes with one (which adds initial_lr to the groups)
    saved = copy.deepcopy(optimizer.state_dict())
    torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    assert "initial_lr" in optimizer.param_groups[0] and optimizer_problems("opt", saved, optimizer) == []


def test_settings_torch_accepts_in_either_form_are_not_refused():
    net = torch.nn.Linear(2, 2)
    fused = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    saved = copy.deepcopy(torch.optim.Adam(net.parameters(), lr=1e-3).state_dict())  # fused=None: torch's default
    saved["param_groups"][0]["lr"] = torch.tensor(2e-3)  # a tensor learning rate
    assert saved["param_groups"][0]["fused"] is None and optimizer_problems("opt", saved, fused) == []
    saved["param_groups"][0]["fused"] = "yes"
    assert optimizer_problems("opt", saved, fused) == [
        "optimizer 'opt': param group 0: fused must be a bool (or None) like the optimizer's True, got 'yes'"]


@pytest.mark.parametrize("make, change, entry", [
    (lambda params: torch.optim.RMSprop(params, centered=False), dict(centered=True), "grad_avg"),
    (lambda params: torch.optim.RMSprop(params), dict(momentum=0.9), "momentum_buffer"),
    (lambda params: torch.optim.AdamW(params), dict(amsgrad=True), "max_exp_avg_sq"),
])
def test_settings_that_need_state_the_checkpoint_lacks_are_refused(make, change, entry):
    """A saved param group may switch on a setting whose step reads state the saved state lacks: torch loads it,
    and the first step fails (KeyError) after the run has rewound its writers and rewritten config.py."""
    net = torch.nn.Linear(2, 2)
    optimizer = make(net.parameters())
    net(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    saved = copy.deepcopy(optimizer.state_dict())
    live = make(torch.nn.Linear(2, 2).parameters())
    assert optimizer_problems("opt", saved, live) == []
    saved["param_groups"][0].update(change)
    assert optimizer_problems("opt", saved, live) == [
        f"optimizer 'opt': a step with the checkpoint's settings needs state entry {entry!r}, which the checkpoint "
        "lacks"]
    assert live.state_dict()["state"] == {}  # the check stepped a copy


def test_a_trial_step_leaves_the_saved_state_untouched(saved):
    checkpoint = read_checkpoint(saved)
    state = checkpoint["policy"]["optimizers"]["actor"]
    before = copy.deepcopy(state)
    learner = _learner(None)
    assert optimizer_problems("actor", state, learner.policy.actor_opt) == []
    assert all(torch.equal(before["state"][i][k], v) for i in before["state"] for k, v in state["state"][i].items())


# --------------------------------------------------------------------------- crafted files, from the command line
def _rlearn(*args):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "rlearn", *map(str, args)], capture_output=True, text=True,
                          cwd=root, timeout=300)


@pytest.fixture(scope="module")
def dqn_run(tmp_path_factory):
    """A short DQN run whose Adam has stepped and whose checkpoint holds a replay buffer."""
    work = tmp_path_factory.mktemp("dqn") / "run"
    done = _rlearn("train", "dqn_cartpole", "--work-dir", work, "--set", "train.max_env_steps=64",
                   "policy.learning_starts=16", "eval.freq=none", "eval.episodes=1", "policy.hidden_sizes=[8]")
    assert done.returncode == 0, done.stderr[-2000:]
    return work


def _crafted_copy(dqn_run, tmp_path, change):
    """A copy of the run whose ``latest.pt`` (the only checkpoint left) holds ``change(raw)``, digest valid."""
    import io
    import shutil

    from rlearn.checkpoint.integrity import append_digest

    work = tmp_path / "run"
    shutil.copytree(dqn_run, work)
    for path in work.glob("ckpt/*.pt"):
        if path.name != "latest.pt":
            path.unlink()
    raw = torch.load(work / "ckpt" / "latest.pt", weights_only=True)
    change(raw)
    buffer = io.BytesIO()
    torch.save(raw, buffer)
    append_digest(buffer)
    (work / "ckpt" / "latest.pt").write_bytes(buffer.getvalue())
    return work


def _amsgrad(raw):
    raw["policy"]["optimizers"]["q"]["param_groups"][0]["amsgrad"] = True


def _huge_buffer(raw):
    raw["states"]["replay_buffer"]["data"]["obs"]["shape"] = (10**10, 3)


@pytest.mark.parametrize("change, message", [
    (_amsgrad, "optimizer 'q': a step with the checkpoint's settings needs state entry 'max_exp_avg_sq', which "
               "the checkpoint lacks"),
    (_huge_buffer, "states.replay_buffer.data.obs: an array of shape (10000000000, 3) needs 30000000000 values"),
])
def test_a_crafted_checkpoint_is_refused_by_resume_in_one_line_and_eval_still_plays_it(dqn_run, tmp_path, change,
                                                                                       message):
    """Before: the amsgrad flag passed the check, the run rewound its writers and rewrote config.py, then died at the
    first step (KeyError); the array raised ValueError outside the checkpoint errors, in --resume and in eval."""
    work = _crafted_copy(dqn_run, tmp_path, change)
    before = {path: path.read_bytes() for path in work.rglob("*") if path.is_file()}
    done = _rlearn("train", work / "config.py", "--work-dir", work, "--resume", "--set", "train.max_env_steps=512")
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr
    after = {path: path.read_bytes() for path in work.rglob("*") if path.is_file()}
    log = work / "dqn_cartpole.log"  # the log may say why the resume stopped, after what it held
    assert after.pop(log).startswith(before.pop(log))
    assert after == before  # nothing else changed: config.py, metrics, event files, checkpoints
    played = _rlearn("eval", work / "ckpt" / "latest.pt", "--episodes", "1")
    assert played.returncode == 0, played.stderr[-3000:]
    assert "episode_return: mean" in played.stdout
