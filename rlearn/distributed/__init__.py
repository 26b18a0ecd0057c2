"""Multi-process helpers on top of ``torch.distributed``.

Everything here works unchanged in a single process (rank 0 of 1), so the rest of rlearn calls these
functions without asking whether it runs distributed.

* :func:`init_distributed` / :func:`shutdown` start and stop the process group (gloo on CPU, nccl on GPU)
  from the variables ``torchrun`` sets (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``...).
* :func:`reduce_window_stats` merges the monitor's window statistics of every rank **by presence**: a key
  reported by 3 of 4 ranks is averaged over those 3, weighted by how many values each had.
* :func:`measure_clock_offset` estimates each rank's wall-clock offset from rank 0 for timeline traces.
* :mod:`rlearn.distributed.ddp` wraps a policy's networks in ``DistributedDataParallel``
  (:meth:`policies.Policy.setup_distributed`); :mod:`rlearn.distributed.launch` re-launches a command through
  ``torchrun`` (``rlearn train CONFIG --nproc N``).
"""

from rlearn.distributed.clock import ClockOffset, measure_clock_offset
from rlearn.distributed.reduce import WindowStat, local_window_stats, merge_window_stats, reduce_window_stats
from rlearn.distributed.utils import (
    DistributedError,
    all_gather_object,
    barrier,
    broadcast_object,
    get_local_rank,
    get_rank,
    get_world_size,
    init_distributed,
    is_distributed,
    is_main_process,
    shutdown,
)

__all__ = [
    "ClockOffset",
    "DistributedError",
    "WindowStat",
    "all_gather_object",
    "barrier",
    "broadcast_object",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "init_distributed",
    "is_distributed",
    "is_main_process",
    "local_window_stats",
    "measure_clock_offset",
    "merge_window_stats",
    "reduce_window_stats",
    "shutdown",
]
