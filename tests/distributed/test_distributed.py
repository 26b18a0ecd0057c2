"""Multi-process training: DDP wrapping of policies, cross-rank reduction in LogShowHook, torchrun runs.

The first group spawns 2 gloo processes once (module fixture) and runs every in-process check in them
(tests/distributed/dist_helpers.py): a regression policy trained through DDP and through torch.autograd.grad must
match a single-process reference on the pooled data; TD3 and PPG must end with identical parameters on
both ranks; a learner with LogShowHook must reduce the ranks' windows by presence.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import dist_helpers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    work_dir = tmp_path_factory.mktemp("two_ranks")
    mp.start_processes(dist_helpers.two_rank_checks, args=(2, _free_port(), str(work_dir)), nprocs=2,
                       start_method="spawn", join=True)
    results = {rank: torch.load(work_dir / f"results_rank{rank}.pt", weights_only=False) for rank in range(2)}
    for rank, res in results.items():
        assert "error" not in res, f"rank {rank} failed:\n{res['error']}"
    return results, work_dir


def _assert_same(a, b, what):
    assert a.keys() == b.keys(), what
    for key in a:
        assert torch.equal(a[key], b[key]), f"{what}: {key} differs between ranks"


@pytest.mark.parametrize("mode", ["backward", "manual"])
def test_gradients_are_averaged_like_one_process_on_the_pooled_data(two_ranks, mode):
    results, _ = two_ranks
    r0, r1 = results[0][mode], results[1][mode]
    # ranks started from different initialisations; setup_distributed copied rank 0's everywhere
    assert not torch.equal(r0["before"]["net.weight"], r1["before"]["net.weight"])
    _assert_same(r0["init"], r1["init"], "after setup_distributed")
    assert torch.equal(r0["init"]["weight"], r0["before"]["net.weight"])
    _assert_same(r0["after"], r1["after"], "after training")
    for key, value in r0["reference"].items():
        torch.testing.assert_close(r0["after"][f"net.{key}"], value, rtol=1e-5, atol=1e-6)
    # the attribute is wrapped, modules() and state_dict() are not
    assert r0["wrapped"] == "PolicyDDP"
    assert r0["modules_types"] == ["Linear"]
    assert r0["state_keys"] == ["bias", "weight"]


def test_ddp_averages_backward_gradients_without_extra_collective(two_ranks):
    results, _ = two_ranks
    assert results[0]["backward"]["fallback_steps"] == 0
    assert results[0]["backward"]["warnings"] == []


def test_gradients_ddp_cannot_see_are_averaged_before_the_step_with_a_warning(two_ranks):
    results, _ = two_ranks
    manual = results[0]["manual"]
    assert manual["fallback_steps"] == 3
    assert len(manual["warnings"]) == 1 and "'net'" in manual["warnings"][0]
    assert "ddp_modules()" in manual["warnings"][0]


def test_td3_ranks_stay_identical(two_ranks):
    """TD3 on different data per rank ends with identical parameters on both ranks. Its losses are
    differentiated by autograd (through the feature-major kernels' autograd Function), so DDP's gradient
    hooks average every critic and delayed actor step: the fallback averager never runs and nothing warns."""
    results, _ = two_ranks
    td3_0, td3_1 = results[0]["td3"], results[1]["td3"]
    assert not torch.equal(td3_0["before"]["actor.layers.0.weight"], td3_1["before"]["actor.layers.0.weight"])  # seeds differ
    _assert_same(td3_0["init"], td3_1["init"], "TD3 after setup_distributed")
    _assert_same(td3_0["after"], td3_1["after"], "TD3")
    assert {"actor.layers.0.weight", "critic_target.layers.0.weight", "actor_target.layers.0.weight"} <= set(td3_0["after"])
    for name in ("actor.layers.0.weight", "critic.layers.0.weight", "actor_target.layers.0.weight"):
        assert not torch.equal(td3_0["after"][name], td3_0["init"][name]), f"{name} did not train"
    # the ranks learned from different minibatches: their losses differ at every iteration
    assert all(a["critic_loss"] != b["critic_loss"] for a, b in zip(td3_0["infos"], td3_1["infos"]))
    assert ["actor_loss" in keys for keys in td3_0["keys"]] == [False, True, False, True]
    assert td3_0["wrapped"] == {"actor": "PolicyDDP", "critic": "PolicyDDP", "actor_target": "Actor"}
    for td3 in (td3_0, td3_1):
        assert td3["fallback_steps"] == 0
        assert td3["warnings"] == []


def test_ppg_ranks_stay_identical_and_ddp_does_all_the_averaging(two_ranks):
    results, _ = two_ranks
    ppg_0, ppg_1 = results[0]["ppg"], results[1]["ppg"]
    _assert_same(ppg_0["after"], ppg_1["after"], "PPG")
    assert "auxiliary_loss" in ppg_0["keys"][1]  # the auxiliary phase ran
    assert ppg_0["fallback_steps"] == 0 and ppg_0["warnings"] == []


@pytest.mark.parametrize("check", ["ppo", "ppo_continuous"])
def test_ppo_ranks_stop_at_the_same_step_and_stay_identical(two_ranks, check):
    """target_kl on different data per rank: the ranks average approx_kl before deciding, so they stop
    together (an update that stopped on one rank only would hang DDP) and end identical."""
    results, _ = two_ranks
    ppo_0, ppo_1 = results[0][check], results[1][check]
    _assert_same(ppo_0["after"], ppo_1["after"], check)
    assert ppo_0["early_stop_epochs"] == ppo_1["early_stop_epochs"]
    assert any(epoch is not None for epoch in ppo_0["early_stop_epochs"])  # the stop did happen


def test_teardown_distributed_leaves_plain_networks_that_train_alone(two_ranks):
    """The run calls it before leaving the process group: afterwards the policy holds its plain networks, its
    optimizers have no averaging hook, and a step on one rank neither waits for nor changes the other."""
    results, _ = two_ranks
    r0, r1 = results[0]["teardown"], results[1]["teardown"]
    for r in (r0, r1):
        assert r["wrapper_type"] == "PolicyDDP" and r["net_type"] == "Linear"
        assert r["undone"] == [True, False] and r["distributed_state"] is None
        assert r["optimizer_hooks"] == 0
    _assert_same(r0["averaged"], r1["averaged"], "the step before the teardown (averaged)")
    assert not torch.equal(r0["after"]["net.weight"], r1["after"]["net.weight"])  # no averaging after it


def test_log_show_hook_reduces_windows_by_presence(two_ranks):
    results, work_dir = two_ranks
    learner_0, learner_1 = results[0]["learner"], results[1]["learner"]
    _assert_same(learner_0["after"], learner_1["after"], "probe policy")
    assert len(learner_0["tables"]) == 2 and learner_1["tables"] == []
    assert not any("never been reported" in m for m in learner_0["messages"])

    events = list((work_dir / "tb").glob("events.out.tfevents.*"))
    assert len(events) == 1  # rank 0 alone writes TensorBoard
    acc = EventAccumulator(str(events[0]))
    acc.Reload()

    def points(tag):
        return [(e.step, e.value) for e in acc.Scalars(tag)]

    # rank 0 only: 10 + n over iterations 1..5 and 6..10 -- not diluted by rank 1's silence
    assert points("learner_iter/only_rank0_avg") == [(5, 13.0), (10, 18.0)]
    # rank 1 only, every third iteration: 103 in the first window; 106 and 109 in the second
    assert points("learner_iter/rank1_only_avg") == [(5, 103.0), (10, 107.5)]
    # every rank every iteration: 5 zeros and 5 ones per window
    assert points("learner_iter/rank_value_avg") == [(5, 0.5), (10, 0.5)]
    assert [e.step for e in acc.Scalars("learner_step/only_rank0_avg")] == [80, 160]
    assert all(math.isfinite(v) for _, v in points("learner_iter/loss_avg"))


# ------------------------------------------------------------------------------ torchrun end to end
ROOT = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).resolve().parent / "dist_helpers.py"


def _probe_config(tmp_path: Path, **train) -> Path:
    """A run of ProbePolicy on CartPole: 2 envs x 4 steps per rank and iteration = 16 global env steps."""
    config = tmp_path / "probe.py"
    config.write_text(
        "config = dict(\n"
        "    exp_name='probe', seed=3, profile=True,\n"
        f"    custom_imports=[{str(HELPERS)!r}],\n"
        "    env=dict(id='CartPole-v1', num_envs=2),\n"
        "    policy=dict(type='dist_probe', rollout_steps=4),\n"
        f"    train=dict(max_env_steps={train.get('max_env_steps', 320)}),\n"
        "    learner=dict(log_freq=5, monitor_window=5),\n"
        f"    eval=dict(freq={train.get('eval_freq', 96)}, episodes=1, stop_value={train.get('stop_value', 1.0)}),\n"
        "    checkpoint=dict(freq=None),\n"
        "    dist=dict(timeout_s=60),\n"
        ")\n"
    )
    return config


def _rlearn(args, env_extra, cwd, timeout=240):
    env = dict(os.environ, RLEARN_NO_PROGRESS="1", **env_extra)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rlearn", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return done, time.monotonic() - start


def test_two_processes_end_to_end_with_torchrun(tmp_path):
    """rlearn train --nproc 2: identical parameters, presence reduction in TensorBoard, rank log files,
    one TensorBoard run, the stop decision of rank 0's evaluation, and a 2-process timeline trace."""
    work_dir, dumps = tmp_path / "run", tmp_path / "dumps"
    dumps.mkdir()
    config = _probe_config(tmp_path)
    done, _ = _rlearn(["train", str(config), "--nproc", "2", "--work-dir", str(work_dir)],
                      {dist_helpers.DUMP_ENV: str(dumps)}, tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    # eval at 96 global env steps (iteration 6) reached stop_value on rank 0: both ranks stopped there
    states = [torch.load(dumps / f"rank{r}.pt") for r in range(2)]
    assert [s["iterations"] for s in states] == [6, 6]
    for name in ("net", "net_target"):
        _assert_same(states[0]["modules"][name], states[1]["modules"][name], name)
    checkpoint = torch.load(work_dir / "ckpt" / "latest.pt", weights_only=False)
    assert (checkpoint["train_iter"], checkpoint["envstep"]) == (6, 96)
    # each rank unwrapped its DDP networks before leaving the process group (no wrapper outlives it)
    for r in range(2):
        teardown = torch.load(dumps / f"teardown_rank{r}.pt")
        assert teardown == {"before": "PolicyDDP", "after": "ProbeNet", "undone": True, "group_active": True}

    log0, log1 = work_dir / "probe.log", work_dir / "probe_rank1.log"
    assert log1.is_file() and "exp probe: ProbePolicy" in log1.read_text()
    text0 = log0.read_text()
    assert "stop_value reached" in text0 and "parameters identical on all 2 ranks (net, net_target)" in text0
    assert "never been reported" not in text0
    assert sorted(p.name for p in work_dir.iterdir()) == ["ckpt", "config.py", "evaluations.jsonl", "metrics.jsonl", "probe.log",
                                                          "probe_rank1.log", "tb", "trace"]

    events = [p for p in work_dir.rglob("*") if "tfevents" in p.name]
    assert len(events) == 1 and events[0].parent == work_dir / "tb"
    acc = EventAccumulator(str(events[0]))
    acc.Reload()
    points = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    # rank 0 only: 10 + n over iterations 1..5, then the final table (after the run) over exactly its
    # 5-iteration window 2..6 (not 3..6: the last log averages as many iterations as every other)
    assert points["learner_iter/only_rank0_avg"] == [(5, 13.0), (6, 14.0)]
    # rank 1 only, every third iteration: 103 in 1..5; 103 and 106 in 2..6
    assert points["learner_iter/rank1_only_avg"] == [(5, 103.0), (6, 104.5)]
    assert points["learner_iter/rank_value_avg"] == [(5, 0.5), (6, 0.5)]
    assert [s for s, _ in points["learner_step/only_rank0_avg"]] == [80, 96]  # global env steps
    assert [s for s, _ in points["evaluator_step/episode_return_mean"]] == [96]

    trace_file = tmp_path / "trace.json"
    done, _ = _rlearn(["trace", str(work_dir), "-o", str(trace_file), "--no-summary"], {}, tmp_path)
    assert done.returncode == 0, done.stderr
    trace_events = json.loads(trace_file.read_text())["traceEvents"]
    # one process per rank (pid = rank + 1: Perfetto reserves pid 0; docs/timeline-traces.md)
    names = {e["pid"]: e["args"]["name"] for e in trace_events if e.get("name") == "process_name"}
    assert names == {1: "rank 0", 2: "rank 1"}
    spans = {(names[e["pid"]], e["name"]) for e in trace_events if e["ph"] == "X"}
    assert {("rank 0", "learner/iteration"), ("rank 1", "learner/iteration"), ("rank 0", "evaluator/eval"),
            ("rank 1", "evaluator/wait_for_rank0")} <= spans
    assert ("rank 0", "evaluator/wait_for_rank0") not in spans  # only the ranks that wait record the wait


def test_a_failing_rank_stops_the_whole_run(tmp_path):
    """Rank 1 raises at iteration 3: the run exits non-zero well within the collective timeout, the
    output carries rank 1's error, and rank 0's log says why it stopped."""
    work_dir = tmp_path / "run"
    config = _probe_config(tmp_path, eval_freq=None, stop_value=None)
    done, elapsed = _rlearn(["train", str(config), "--nproc", "2", "--work-dir", str(work_dir)],
                            {dist_helpers.FAIL_ENV: "1:3"}, tmp_path, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert elapsed < 120
    assert "InjectedFailure: probe failure injected on rank 1 at iteration 3" in output
    assert "rank 0 of 2 stopped" in (work_dir / "probe.log").read_text()
    assert "rank 1 of 2 stopped: InjectedFailure" in (work_dir / "probe_rank1.log").read_text()


def test_ranks_started_with_different_configs_refuse_to_start_naming_the_keys(tmp_path):
    """Rank 1 resolves another policy.lr and train.max_env_steps (its config file reads RANK): both ranks stop
    before training with a one-line error naming the keys and both values, instead of training apart and
    timing out in a collective."""
    config = _probe_config(tmp_path, eval_freq=None, stop_value=None)
    text = config.read_text().replace("rollout_steps=4)", "rollout_steps=4, lr=0.01 if RANK == '0' else 0.02)")
    text = text.replace("max_env_steps=320", "max_env_steps=320 if RANK == '0' else 640")
    config.write_text("import os\nRANK = os.environ.get('RANK', '0')\n" + text)
    work_dir = tmp_path / "run"
    done, _ = _rlearn(["train", str(config), "--nproc", "2", "--work-dir", str(work_dir)], {}, tmp_path, timeout=120)
    message = ("rlearn train: error: the 2 ranks were started with different configs; every rank must run the same "
               "one (the same config file and --set overrides): rank 1 differs from rank 0 in policy.lr (0.01 on "
               "rank 0, 0.02 on rank 1), train.max_env_steps (320 on rank 0, 640 on rank 1)")
    assert done.returncode == 2, done.stderr[-3000:]  # a config error, as in one process; not torchrun's 1
    assert done.stderr.count(message) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if "error" in line.lower()] == [message], done.stderr[-3000:]
    assert not (work_dir / "ckpt").exists() and not (work_dir / "tb").exists()


@pytest.mark.slow
def test_two_processes_resume_continue_counters_and_stay_identical(tmp_path):
    work_dir, dumps = tmp_path / "run", tmp_path / "dumps"
    dumps.mkdir()
    config = _probe_config(tmp_path, eval_freq=None, stop_value=None, max_env_steps=160)
    args = ["train", str(config), "--nproc", "2", "--work-dir", str(work_dir)]
    done, _ = _rlearn(args, {}, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done, _ = _rlearn(args + ["--resume", "--set", "train.max_env_steps=320"], {dist_helpers.DUMP_ENV: str(dumps)},
                      tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    states = [torch.load(dumps / f"rank{r}.pt") for r in range(2)]
    assert [s["iterations"] for s in states] == [20, 20]
    _assert_same(states[0]["modules"]["net"], states[1]["modules"]["net"], "net after resuming")
    acc = EventAccumulator(str(work_dir / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("learner_iter/only_rank0_avg")] == [5, 10, 15, 20]
    assert "resumed from" in (work_dir / "probe_rank1.log").read_text()


# ------------------------------------------------------------------------- single process, no launch
def test_setup_distributed_is_a_no_op_in_one_process():
    from gymnasium import spaces

    policy = dist_helpers.ProbePolicy(None, spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2), seed=0)
    net = policy.net
    assert policy.setup_distributed() is False
    assert policy.net is net and getattr(policy, "_distributed", None) is None
    assert policy.ddp_modules() == ["net"]  # the target network is updated by no optimizer


def test_leave_process_group_tears_down_first_and_never_raises(monkeypatch):
    """The run's last step on a rank: the policy's teardown, then shutdown; a failing teardown is ignored
    (leaving must not hide the error that ended the run), and shutdown still happens."""
    from rlearn.distributed import ddp

    calls = []
    monkeypatch.setattr(ddp, "shutdown", lambda: calls.append("shutdown"))

    class Failing:
        def teardown_distributed(self):
            calls.append("teardown")
            raise RuntimeError("boom")

    ddp.leave_process_group(Failing())
    ddp.leave_process_group(None)  # a run that failed before it built its policy
    assert calls == ["teardown", "shutdown", "shutdown"]


def test_default_ddp_modules_of_td3_and_ppg_leave_targets_out():
    from gymnasium import spaces

    from policies.ppg import PPGPolicy
    from policies.td3 import TD3Policy

    td3 = TD3Policy({"hidden_sizes": [8]}, spaces.Box(-1.0, 1.0, (3,)), spaces.Box(-2.0, 2.0, (1,)))
    assert td3.ddp_modules() == ["actor", "critic"]
    ppg = PPGPolicy({"hidden_sizes": [8]}, spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2))
    assert ppg.ddp_modules() == ["policy_net", "value_net"]


def test_bad_ddp_module_names_are_named_in_the_error():
    from gymnasium import spaces

    from rlearn.distributed.ddp import _check_ddp_names, _holding_attribute

    policy = dist_helpers.ProbePolicy(None, spaces.Box(-1.0, 1.0, (4,)), spaces.Discrete(2), seed=0)
    modules = policy.modules()
    with pytest.raises(ValueError, match="'critic', which is not in modules"):
        _check_ddp_names(policy, ["critic"], modules)
    with pytest.raises(ValueError, match="'net_target', which has no trainable parameter"):
        _check_ddp_names(policy, ["net_target"], modules)
    with pytest.raises(TypeError, match="must return a list"):
        _check_ddp_names(policy, "net", modules)
    with pytest.raises(ValueError, match="share parameters"):
        _check_ddp_names(policy, ["net", "body"], {**modules, "body": policy.net.body})
    policy.alias = policy.net
    with pytest.raises(ValueError, match=r"several attributes \(net, alias\)"):
        _holding_attribute(policy, "net", policy.net)


def test_torchrun_command_and_rebuilt_arguments():
    import argparse

    from rlearn.commands import train
    from rlearn.distributed.launch import torchrun_command

    command = torchrun_command(2, ["train", "cfg.py"], master_port=29999)
    assert command[1:] == ["-m", "rlearn.distributed.launch", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                           "--master_port", "29999", "-m", "rlearn", "train", "cfg.py"]
    with pytest.raises(ValueError, match="--nproc must be an int >= 1"):
        torchrun_command(0, [])
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    args = parser.parse_args(["cfg.py", "--set", "seed=1", "eval.freq=null", "--nproc", "2", "--resume",
                              "--work-dir", "w", "--no-progress"])
    assert train._rebuild_argv(args) == ["cfg.py", "--work-dir", "w", "--resume", "--no-progress", "--set", "seed=1",
                                         "eval.freq=null"]
    assert parser.parse_args(train._rebuild_argv(args)) == argparse.Namespace(**{**vars(args), "nproc": None})


def test_nproc_must_match_the_launched_world(tmp_path, monkeypatch, capsys):
    from rlearn.cli import main

    config = _probe_config(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert main(["train", str(config), "--nproc", "2"]) == 2
    assert "--nproc 2 but this process is one of WORLD_SIZE=3" in capsys.readouterr().err
    monkeypatch.delenv("WORLD_SIZE")
    assert main(["train", str(config), "--nproc", "0"]) == 2
    assert "--nproc must be >= 1" in capsys.readouterr().err


def test_a_checkpoint_of_another_process_count_is_refused_with_the_command_that_resumes_it():
    """Resuming with another number of processes would split the state wrongly: it is refused before
    anything is loaded, with the ``--nproc`` that resumes it; the same count resumes the saved state."""
    from rlearn.run import RunState

    two = RunState(2)
    two.eval.last_envstep = 96
    state = two.state_dict()
    with pytest.raises(ValueError, match=r"2 process\(es\), this run has 1; resume it with --nproc 2"):
        RunState(1).load_state_dict(state)
    without_count = {k: v for k, v in RunState(1).state_dict().items() if k != "world_size"}
    with pytest.raises(ValueError, match=r"run state: expected keys \[.*'world_size'\], got \[.*'update_credit'\]"):
        RunState(2).load_state_dict(without_count)
    again = RunState(2)
    again.load_state_dict(state)
    assert again.eval.last_envstep == 96
