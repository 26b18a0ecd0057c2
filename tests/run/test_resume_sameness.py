"""What a resumed run shares with an uninterrupted one (docs/checkpoints.md, "What is and is not identical
after a resume"): the same x positions and the same points up to the checkpoint; other values after it,
because the environments restart fresh episodes; and two resumes of one checkpoint are identical."""

from __future__ import annotations

import shutil

import torch

from rlearn.checkpoint import read_checkpoint
from rlearn.run import train
from test_run import reinforce_cfg, scalars


def _numbers(tb_dir) -> dict:
    """Every TensorBoard curve but the wall-clock ones (timings, throughput)."""
    return {tag: points for tag, points in scalars(tb_dir).items()
            if not any(word in tag for word in ("time", "throughput", "per_sec", "iters/s"))}


def _params(path) -> dict:
    return read_checkpoint(path)["policy"]["modules"]


def test_resumed_run_matches_until_the_checkpoint_then_differs_and_is_reproducible(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    train(reinforce_cfg("train.max_env_steps=256", "eval.freq=none", "learner.log_freq=2"), work_dir=full)       # 8 iterations
    train(reinforce_cfg("train.max_env_steps=128", "eval.freq=none", "learner.log_freq=2"), work_dir=part)       # 4, checkpointed
    copy = tmp_path / "copy"
    shutil.copytree(part, copy)
    for work in (part, copy):
        train(reinforce_cfg("train.max_env_steps=256", "eval.freq=none", "learner.log_freq=2"), work_dir=work, resume=True)

    reference, resumed, again = _numbers(full / "tb"), _numbers(part / "tb"), _numbers(copy / "tb")
    assert resumed == again and len(resumed) > 10  # two resumes of one checkpoint: identical, point by point
    tag = "learner_iter/policy_loss_avg"
    assert [s for s, _ in resumed[tag]] == [s for s, _ in reference[tag]] == [2, 4, 6, 8]
    assert resumed[tag][:2] == reference[tag][:2]           # up to the checkpoint (iteration 4): the same points
    assert resumed[tag][2:] != reference[tag][2:]           # after it: fresh episodes, other values
    for name, state in _params(part / "ckpt" / "latest.pt").items():
        other = _params(copy / "ckpt" / "latest.pt")[name]
        assert all(torch.equal(state[k], other[k]) for k in state), name
    final = _params(full / "ckpt" / "latest.pt")
    assert any(not torch.equal(v, final[n][k]) for n, s in _params(part / "ckpt" / "latest.pt").items()
               for k, v in s.items())
