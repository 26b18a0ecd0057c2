"""Shared by the TD3 and SAC tests: the opt-in bf16 precision of an actor-critic policy."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from tests.policies.reports import host_info


def check_bf16_precision(make_policy, make_batch) -> None:
    """``precision="bf16"``: the networks compute in bf16 (targets too), parameters and optimizer state stay
    fp32, the iterations report the same keys with finite values close to fp32's from the same start, and
    after the steps the networks compute with the weights as they are (not stale bf16 copies)."""
    fp32, bf16 = make_policy(), make_policy(precision="bf16")
    nets = ("actor", "critic", "critic_target") + (("actor_target",) if hasattr(bf16, "actor_target") else ())
    for net in nets:
        assert getattr(bf16, net).compute_dtype == torch.bfloat16 and getattr(fp32, net).compute_dtype is None
    for i in range(4):
        batch = make_batch(fp32, seed=i)
        a, b = host_info(fp32._forward_learn(batch)), host_info(bf16._forward_learn(batch))
        assert set(a) == set(b) and all(math.isfinite(v) for v in b.values())
        if i == 0:  # same parameters, same batch: the reports differ by bf16 rounding only
            for key in a:
                assert b[key] == pytest.approx(a[key], rel=0.05, abs=0.02), key
    assert all(p.dtype == torch.float32 for p in bf16.critic.parameters())
    for state in bf16.critic_optimizer.state.values():
        assert state["exp_avg"].dtype == torch.float32
    for ours, theirs in zip(bf16.critic.parameters(), fp32.critic.parameters()):
        # Adam moves each parameter by about lr per step whatever the gradient's size, so a tiny gradient whose
        # sign bf16 rounding flips puts it up to 2 lr per step away: 4 steps at lr 1e-2
        torch.testing.assert_close(ours, theirs, rtol=0.0, atol=0.08)
    assert any(not torch.equal(x, y) for x, y in zip(bf16.critic.parameters(), fp32.critic.parameters()))
    # the networks compute with the weights as they are after the steps (not stale bf16 copies)
    batch = make_batch(bf16, seed=9)
    for net in (bf16.critic, bf16.critic_target):
        same_in_fp32 = copy.deepcopy(net).set_compute_dtype("fp32")
        with torch.no_grad():
            torch.testing.assert_close(net(batch["obs"], batch["action"]),
                                       same_in_fp32(batch["obs"], batch["action"]), rtol=0.05, atol=0.03)

