"""Multi-process helpers on top of ``torch.distributed``; everything works unchanged in a single process
(DDP for policies: :mod:`rlearn.distributed.ddp`; ``--nproc`` launching: :mod:`rlearn.distributed.launch`)."""

from rlearn.distributed.clock import ClockOffset, measure_clock_offset
from rlearn.distributed.reduce import WindowStat, merge_window_stats, reduce_window_stats
from rlearn.distributed.utils import (DistributedError, all_gather_object, barrier, broadcast_object, get_local_rank,
                                      get_rank, get_world_size, init_distributed, is_distributed, shutdown)

__all__ = ["ClockOffset", "DistributedError", "WindowStat", "all_gather_object", "barrier", "broadcast_object",
           "get_local_rank", "get_rank", "get_world_size", "init_distributed", "is_distributed",
           "measure_clock_offset", "merge_window_stats", "reduce_window_stats", "shutdown"]
