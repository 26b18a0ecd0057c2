"""How much memory this process can still get (standard library only): what the replay buffer's and the
networks' size checks compare their needs with, before anything is allocated."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

__all__ = ["available_memory"]


def available_memory() -> Optional[int]:
    """Bytes of memory this process can still get: the smaller of the machine's available memory
    (``MemAvailable`` in /proc/meminfo) and what its cgroup (a container's memory limit) has left; None
    where neither can be read."""
    limits = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit_file, usage_file in (("memory.max", "memory.current"),  # cgroup v2, then v1
                                   ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")):
        try:
            limit = (Path("/sys/fs/cgroup") / limit_file).read_text().strip()
            usage = int((Path("/sys/fs/cgroup") / usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:  # "max" or a huge number: no limit
            limits.append(max(0, int(limit) - usage))
        break
    return min(limits) if limits else None
