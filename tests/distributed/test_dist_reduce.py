"""Presence-weighted cross-rank reduction and the distributed helpers, in one and two processes."""

import math
import os
import socket

import pytest
import torch.multiprocessing as mp
from hypothesis import given, settings
from hypothesis import strategies as st

from rlearn.distributed import (
    ClockOffset,
    WindowStat,
    get_rank,
    get_world_size,
    measure_clock_offset,
    merge_window_stats,
    reduce_window_stats,
)


def stat_of(values):
    finite = [v for v in values if math.isfinite(v)]
    return WindowStat(
        sum=sum(finite),
        count=len(finite),
        min=min(finite) if finite else None,
        max=max(finite) if finite else None,
        nonfinite=len(values) - len(finite),
        sumsq=sum(v * v for v in finite),
        last=finite[-1] if finite else None,
    )


def test_key_reported_by_some_ranks_is_averaged_over_those_only():
    rank0 = {"loss": stat_of([1.0, 2.0]), "aux": stat_of([10.0])}
    rank1 = {"loss": stat_of([3.0, 4.0])}
    rank2 = {"loss": stat_of([5.0]), "aux": stat_of([20.0, 30.0])}
    rank3 = {}
    merged = merge_window_stats([rank0, rank1, rank2, rank3])
    assert merged["loss"].avg == pytest.approx((1 + 2 + 3 + 4 + 5) / 5)
    # aux: 3 values on 2 of 4 ranks -> (10 + 20 + 30) / 3, not diluted by the two silent ranks
    assert merged["aux"].avg == pytest.approx(20.0)
    assert merged["aux"].count == 3
    assert (merged["aux"].min, merged["aux"].max) == (10.0, 30.0)
    assert list(merged) == ["loss", "aux"]


def test_nonfinite_counts_add_up_and_empty_stays_none():
    merged = merge_window_stats([{"x": stat_of([float("nan")])}, {"x": stat_of([float("inf"), 2.0])}])
    assert merged["x"].nonfinite == 2
    assert merged["x"].avg == 2.0
    assert WindowStat(0.0, 0, None, None, 1).avg is None


def test_std_current_and_count_merge_by_presence():
    per_rank = [{"x": stat_of([1.0, 3.0])}, {}, {"x": stat_of([5.0, float("nan")])}, {"x": stat_of([7.0])}]
    merged = merge_window_stats(per_rank)["x"]
    values = [1.0, 3.0, 5.0, 7.0]
    mean = sum(values) / 4
    assert merged.std == pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in values) / 4), rel=1e-12)
    assert merged.statistic("current") == 3.0  # the lowest rank that has one
    assert merged.statistic("count") == 4 and merged.statistic("mean") == 4.0 and merged.nonfinite == 1
    later = merge_window_stats([{"x": stat_of([float("nan")])}, {"x": stat_of([9.0])}])["x"]
    assert later.last == 9.0  # rank 0 has no finite value: the next rank's
    empty = WindowStat(0.0, 0, None, None, 2)
    for method in ("mean", "min", "max", "current", "std"):
        assert empty.statistic(method) is None
    assert empty.statistic("count") == 0
    with pytest.raises(ValueError, match="unknown statistic 'median'"):
        merged.statistic("median")


def test_merge_rejects_non_stat_values():
    with pytest.raises(TypeError, match="'loss'"):
        merge_window_stats([{"loss": 1.0}])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["a", "b", "c"]),
            st.lists(st.floats(-1e6, 1e6) | st.just(float("nan")), min_size=1, max_size=5),
            max_size=3,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_merge_equals_statistics_of_all_values_pooled(per_rank_values):
    merged = merge_window_stats([{k: stat_of(v) for k, v in ranks.items()} for ranks in per_rank_values])
    pooled = {}
    for ranks in per_rank_values:
        for key, values in ranks.items():
            pooled.setdefault(key, []).extend(values)
    assert set(merged) == set(pooled)
    for key, values in pooled.items():
        ref = stat_of(values)
        assert merged[key].count == ref.count
        assert merged[key].nonfinite == ref.nonfinite
        assert merged[key].min == ref.min and merged[key].max == ref.max
        if ref.count:
            assert merged[key].avg == pytest.approx(ref.avg, rel=1e-9, abs=1e-6)
        else:
            assert merged[key].avg is None


def test_single_process_defaults(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert (get_rank(), get_world_size()) == (0, 1)
    local = {"loss": stat_of([1.0])}
    assert reduce_window_stats(local) == local
    assert measure_clock_offset() == ClockOffset(0, 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, queue) -> None:
    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)
    )
    from rlearn.distributed import init_distributed, shutdown

    assert init_distributed(timeout_s=60)
    local = {"loss": stat_of([float(rank + 1)] * (rank + 1))}
    if rank == 0:
        local["aux"] = stat_of([7.0])
    merged = reduce_window_stats(local)
    offset = measure_clock_offset(rounds=3)
    queue.put((rank, merged, offset))
    shutdown()


def test_two_gloo_processes_reduce_by_presence():
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_worker, args=(2, _free_port(), queue), nprocs=2, start_method="spawn", join=True)
    results = sorted((queue.get() for _ in range(2)), key=lambda r: r[0])
    for rank, merged, offset in results:
        # loss: rank0 has [1], rank1 has [2, 2] -> (1 + 4) / 3
        assert merged["loss"].avg == pytest.approx(5 / 3)
        assert merged["aux"].avg == 7.0 and merged["aux"].count == 1
        # same machine, same clock: the offset is within its own error bound of zero
        assert abs(offset.offset_ns) <= offset.error_ns + 5_000_000
    assert results[0][2] == ClockOffset(0, 0)  # rank 0 is the reference clock: no offset, no error
