"""Rank, world size and process-group life cycle, valid with or without ``torch.distributed``."""

from __future__ import annotations

import datetime
import os
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

import torch
import torch.distributed as dist


class DistributedError(RuntimeError):
    """A distributed set-up or collective failed (a peer died, timed out, or the environment is wrong)."""


def _env_int(name: str, default: int) -> int:
    """``$name`` as an int >= 0, ``default`` when unset or empty; else a DistributedError naming the variable."""
    raw = os.environ.get(name, "")
    if not raw:
        return default
    if not raw.strip().isdecimal():
        raise DistributedError(f"environment variable {name} must be an int >= 0, got {raw!r}")
    return int(raw)


def is_distributed() -> bool:
    """True when a process group with more than one process is initialised."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def get_rank() -> int:
    """This process's global rank (rlearn's one rank function): from the process group if initialised, else
    ``$RANK``, else 0."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return _env_int("RANK", 0)


def get_world_size() -> int:
    """Number of processes: from the process group if initialised, else ``$WORLD_SIZE``, else 1."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return _env_int("WORLD_SIZE", 1)


def get_local_rank() -> int:
    """Rank on this machine (``$LOCAL_RANK``), used to pick a GPU."""
    return _env_int("LOCAL_RANK", 0)


def init_distributed(backend: Optional[str] = None, timeout_s: float = 300.0) -> bool:
    """Join the process group described by torchrun's environment variables; returns whether a multi-process
    group is active. ``backend``: ``nccl`` with CUDA, else ``gloo``; ``timeout_s`` bounds how long a collective
    waits for a peer, so a crashed rank makes the others fail instead of hanging."""
    world_size = _env_int("WORLD_SIZE", 1)
    if world_size <= 1:
        return False
    if dist.is_initialized():
        return dist.get_world_size() > 1
    if not dist.is_available():
        raise DistributedError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    missing = [name for name in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise DistributedError(
            f"WORLD_SIZE={world_size} but {', '.join(missing)} not set: launch with "
            "'torchrun --nproc_per_node N -m rlearn train CONFIG' or 'rlearn train CONFIG --nproc N'")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(get_local_rank())
    try:
        dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
    except Exception as exc:  # noqa: BLE001 - re-raised with context
        raise DistributedError(f"could not join the process group ({backend}): {exc}") from exc
    return True


def shutdown() -> None:
    """Leave the process group if one is active."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if is_distributed():
        dist.barrier()


@contextmanager
def collective(what: str) -> Iterator[None]:
    """Re-raise an error of the collective inside as :class:`DistributedError` ``"rank <r>: <what>: <error>"``; a
    DistributedError passes as it is (a signal handler raises one when the launcher stops this rank)."""
    try:
        yield
    except DistributedError:
        raise
    except Exception as exc:  # noqa: BLE001 - a dead peer or mismatched collectives surface here
        raise DistributedError(f"rank {get_rank()}: {what}: {exc}") from exc


def all_gather_object(obj: Any) -> List[Any]:
    """Gather one picklable object from every rank, in rank order (``[obj]`` in a single process)."""
    if not is_distributed():
        return [obj]
    gathered: List[Any] = [None] * dist.get_world_size()
    with collective("all_gather failed, another rank probably died"):
        dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank (``obj`` itself in a single process); e.g. a stop decision."""
    if not is_distributed():
        return obj
    box = [obj if get_rank() == src else None]
    with collective(f"broadcast from rank {src} failed, a rank probably died"):
        dist.broadcast_object_list(box, src=src)
    return box[0]
