"""A transition is validated once, where it enters: ``ReplayBuffer.add`` checks it, and the batches ``sample``
draws are :class:`ReplayBatch` es that the learner's batch check does not test for NaN again (on an accelerator
that test is one host sync per train iteration). Any other mapping handed to a policy is still tested."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlearn.buffer import ReplayBatch, ReplayBuffer
from rlearn.rl import check_replay_batch


def filled_buffer(n: int = 64, discrete: bool = False) -> ReplayBuffer:
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(256, obs_shape=(3,), action_shape=() if discrete else (2,),
                          action_dtype=np.int64 if discrete else np.float32, seed=0)
    buffer.add(dict(obs=rng.normal(size=(n, 3)).astype(np.float32),
                    action=rng.integers(0, 4, size=n) if discrete else rng.uniform(-1, 1, size=(n, 2)).astype(np.float32),
                    reward=rng.normal(size=n).astype(np.float32), next_obs=rng.normal(size=(n, 3)).astype(np.float32),
                    terminated=(rng.random(n) < 0.1).astype(np.float32)))
    return buffer


class HostTransfers:
    """Counts ``Tensor.item`` and ``Tensor.tolist`` calls (every way the batch check reads a value back)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        for name in ("item", "tolist"):
            original = getattr(torch.Tensor, name)

            def counted(tensor, *args, _original=original, **kwargs):
                self.count += 1
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, counted)


def test_sample_and_prefetched_batches_are_replay_batches():
    buffer = filled_buffer()
    assert type(buffer.sample(8)) is ReplayBatch
    buffer.prefetch(8, 5)
    assert all(type(buffer.sample(8)) is ReplayBatch for _ in range(5))
    assert type(buffer.gather(np.arange(4))) is ReplayBatch


def test_a_sampled_batch_is_not_tested_again_but_a_plain_dict_is(monkeypatch):
    batch = filled_buffer().sample(32)
    transfers = HostTransfers(monkeypatch)
    out = check_replay_batch(batch, "TD3Policy", torch.device("cpu"), (3,), (2,))
    assert transfers.count == 0  # no NaN test: no value read back
    assert all(torch.equal(a, batch[key]) for a, key in zip(out, ("obs", "action", "reward", "next_obs", "terminated")))
    check_replay_batch(dict(batch), "TD3Policy", torch.device("cpu"), (3,), (2,))
    assert transfers.count == 1  # a mapping from elsewhere: the one-sum NaN test
    bad = dict(batch)
    bad["reward"] = bad["reward"].clone()
    bad["reward"][3] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite values \(NaN/inf\) in batch \['reward'\]"):
        check_replay_batch(bad, "TD3Policy", torch.device("cpu"), (3,), (2,))


def test_a_sampled_discrete_batch_still_has_its_action_indices_checked(monkeypatch):
    batch = filled_buffer(discrete=True).sample(32)
    transfers = HostTransfers(monkeypatch)
    check_replay_batch(batch, "DQNPolicy", torch.device("cpu"), (3,), n_actions=4)
    assert transfers.count == 2  # low and high of the indices: the buffer does not know the action count
    with pytest.raises(ValueError, match=r"batch\['action'\] holds indices outside \[0, 3\)"):
        check_replay_batch(batch, "DQNPolicy", torch.device("cpu"), (3,), n_actions=3)


def test_add_still_refuses_non_finite_values_and_bad_flags():
    buffer = filled_buffer()
    good = {key: value.numpy() for key, value in buffer.sample(4).items()}
    for key, value in (("next_obs", np.nan), ("reward", np.inf), ("terminated", 0.5)):
        bad = {k: v.copy() for k, v in good.items()}
        bad[key].reshape(-1)[0] = value
        with pytest.raises(ValueError, match=repr(key)):
            buffer.add(bad)
    assert len(buffer) == 64  # nothing was added
