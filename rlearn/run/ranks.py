"""Random streams per rank (rank ``r`` seeds everything with ``seed + r * RANK_SEED_STRIDE``), and the checks
that every rank starts with the same config and ends with the same parameters."""

from __future__ import annotations

import hashlib
import logging
import random
from typing import Any, List, Mapping, Optional

import numpy as np

from rlearn import distributed as dist
from rlearn.config.errors import ConfigError
from rlearn.values import is_int

__all__ = [
    "RANK_SEED_STRIDE", "derived_seed", "seed_everything", "rederive_rank_streams", "check_ranks_agree", "check_seed",
    "max_seed", "check_same_config", "config_differences", "RanksDisagree",
]

#: rank ``r`` of a multi-process run seeds everything with ``seed + r * RANK_SEED_STRIDE``
RANK_SEED_STRIDE = 1000


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's global and torch's generators."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def derived_seed(seed: int, stream: int) -> int:
    """A seed for another random stream (the evaluation environments), far from ``seed + i``."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0] % 2**31)


def rederive_rank_streams(rank_seed: int, train_iter: int, policy: Any, buffer: Optional[Any]) -> None:
    """After loading rank 0's checkpoint, give a rank > 0 its own random streams again (from its ``rank_seed`` and
    the iteration), so it does not replay rank 0's exploration and minibatches."""
    stream = derived_seed(rank_seed, train_iter)
    seed_everything(stream)
    policy.np_random = np.random.default_rng([rank_seed, train_iter])
    if buffer is not None:
        state = buffer.state_dict()
        state["rng"] = np.random.default_rng([stream, 1]).bit_generator.state
        buffer.load_state_dict(state)


def check_ranks_agree(policy: Any, logger: logging.Logger, rank: int, world_size: int) -> None:
    """Collective: compare a digest of every network across ranks and log the outcome on rank 0."""
    digests = {}
    for name, module in policy.modules().items():
        h = hashlib.sha1()
        for tensor in module.state_dict().values():
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        digests[name] = h.hexdigest()
    gathered = dist.all_gather_object(digests)
    differing = sorted(name for name in digests if any(other.get(name) != digests[name] for other in gathered))
    if rank == 0 and differing:
        logger.error("parameters differ across the %d ranks for %s: their gradients were not averaged (see "
                     "docs/distributed.md); the checkpoint holds rank 0's", world_size, ", ".join(differing))
    elif rank == 0:
        logger.info("parameters identical on all %d ranks (%s)", world_size, ", ".join(digests))


def config_differences(configs: List[Mapping[str, str]], shown: int = 6) -> List[str]:
    """One line per rank whose flattened config (dotted key -> ``repr``) differs from rank 0's, naming at most
    ``shown`` differing keys with both values."""
    lines = []
    reference = configs[0]
    for rank, config in enumerate(configs[1:], start=1):
        keys = sorted(key for key in set(reference) | set(config) if reference.get(key) != config.get(key))
        if keys:
            listed = ", ".join(f"{key} ({reference.get(key, '<absent>')} on rank 0, {config.get(key, '<absent>')} on "
                               f"rank {rank})" for key in keys[:shown])
            more = f" and {len(keys) - shown} more key(s)" if len(keys) > shown else ""
            lines.append(f"rank {rank} differs from rank 0 in {listed}{more}")
    return lines


class RanksDisagree(ConfigError):
    """The ranks resolved different configs; every rank raises it, only ``rank`` 0 says it (``rlearn train``)."""

    def __init__(self, message: str, rank: int) -> None:
        super().__init__(message)
        self.rank = rank


def check_same_config(cfg: Mapping[str, Any]) -> None:
    """Collective: every rank raises a ConfigError naming the differing keys when the ranks resolved different
    configs (they would diverge silently, then time out in a collective); only digests are gathered unless so."""
    from rlearn.config import flatten

    if not dist.is_distributed():
        return
    flat = {key: repr(value) for key, value in flatten(dict(cfg)).items()}
    digests = dist.all_gather_object(hashlib.sha256(repr(sorted(flat.items())).encode()).hexdigest())
    if len(set(digests)) == 1:
        return
    differences = config_differences(dist.all_gather_object(flat))
    raise RanksDisagree(
        f"the {len(digests)} ranks were started with different configs; every rank must run the same one (the same "
        f"config file and --set overrides): {'; '.join(differences)}", dist.get_rank())


def check_seed(seed: Any, world_size: int) -> None:
    """Refuse (a ConfigError naming ``seed``) a seed that ``seed + RANK_SEED_STRIDE * rank`` plus small offsets
    per environment would push past 64 bits."""
    limit = max_seed(world_size)
    if not is_int(seed) or not 0 <= seed <= limit:
        raise ConfigError(f"config key 'seed' (--seed) must be an int in 0..{limit} (seeds are 64-bit and rank r "
                          f"of {world_size} adds {RANK_SEED_STRIDE} r), got {seed!r}")


def max_seed(world_size: int) -> int:
    """The largest seed a run of ``world_size`` processes accepts (see :func:`check_seed`)."""
    return 2**63 - 1 - RANK_SEED_STRIDE * max(1, int(world_size)) - 2**16
