"""Split the intervals of one lane into sub-lanes on which every pair is either disjoint (touching is fine) or
nested, as trace viewers need to draw a track ("learner", "learner (2)", ...): greedy first fit in (start
ascending, end descending) order, each sub-lane keeping a stack of its open intervals."""

from __future__ import annotations

from typing import Any, Hashable, List, Optional, Sequence, Tuple


def nests_in(stack: List[Tuple[Any, ...]], start: int, end: int, group: Hashable = None) -> bool:
    """Pop the intervals that ended by ``start`` from ``stack`` (``(end, group, ...)`` of open intervals, innermost
    last) and say whether ``[start, end]`` of ``group`` nests in the innermost one left (or none is left)."""
    while stack and stack[-1][0] <= start:
        stack.pop()
    return not stack or (end <= stack[-1][0] and group == stack[-1][1])


def assign_lanes(intervals: Sequence[Tuple[int, int]], groups: Optional[Sequence[Hashable]] = None) -> List[int]:
    """Sub-lane index (0, 1, ...) for each ``(start, end)`` interval, in input order, so that every sub-lane holds
    a nested family. With ``groups`` (e.g. each interval's recording thread) an interval nests only inside one of
    its own group. Raises ``ValueError`` for an interval with ``end < start``."""
    if groups is not None and len(groups) != len(intervals):
        raise ValueError(f"{len(groups)} groups for {len(intervals)} intervals")
    for index, (start, end) in enumerate(intervals):
        if end < start:
            raise ValueError(f"interval {index} ends before it starts: ({start}, {end})")
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], -intervals[i][1], i))
    stacks: List[List[Tuple[int, Hashable]]] = []  # per sub-lane: (end, group) of open intervals, innermost last
    lanes = [0] * len(intervals)
    for index in order:
        start, end = intervals[index]
        group = None if groups is None else groups[index]
        for lane, stack in enumerate(stacks):
            if nests_in(stack, start, end, group):
                break
        else:
            stacks.append([])
            lane = len(stacks) - 1
        stacks[lane].append((end, group))
        lanes[index] = lane
    return lanes


def lane_label(lane: str, sub_lane: int) -> str:
    """Display name of sub-lane ``sub_lane`` of ``lane``: ``"learner"``, ``"learner (2)"``, ..."""
    return lane if sub_lane == 0 else f"{lane} ({sub_lane + 1})"
