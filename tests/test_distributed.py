"""Multi-process training: DDP wrapping of policies, cross-rank reduction in LogShowHook, torchrun runs.

The first group spawns 2 gloo processes once (module fixture) and runs every in-process check in them
(tests/dist_helpers.py): a regression policy trained through DDP and through torch.autograd.grad must
match a single-process reference on the pooled data; TD3 and PPG must end with identical parameters on
both ranks; a learner with LogShowHook must reduce the ranks' windows by presence.
"""

from __future__ import annotations

import math
import socket

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
    results, _ = two_ranks
    td3_0, td3_1 = results[0]["td3"], results[1]["td3"]
    _assert_same(td3_0["after"], td3_1["after"], "TD3")
    assert {"actor.net.0.weight", "critic_target.layers.0.weight", "actor_target.net.0.weight"} <= set(td3_0["after"])
    assert ["actor_loss" in keys for keys in td3_0["keys"]] == [False, True, False, True]


def test_ppg_ranks_stay_identical_and_ddp_does_all_the_averaging(two_ranks):
    results, _ = two_ranks
    ppg_0, ppg_1 = results[0]["ppg"], results[1]["ppg"]
    _assert_same(ppg_0["after"], ppg_1["after"], "PPG")
    assert "auxiliary_loss" in ppg_0["keys"][1]  # the auxiliary phase ran
    assert ppg_0["fallback_steps"] == 0 and ppg_0["warnings"] == []


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
