"""How many Python calls one log costs per key inside the metric path (store, statistics, hub, learner glue,
log hook, rank merge, writer fan-out), traced with ``sys.setprofile``; this tree or another revision's.

A DQN learner whose policy reports its declared keys and ``--keys`` more every iteration for 20 iterations, then
``LogShowHook.log`` runs under the profiler; the calls made by functions in the metric path's files are counted
and divided by the number of keys the log shows (the writers themselves are outside the path, none is on).

    .venv/bin/python benchmarks/metric_path_calls.py --keys 12
    PYTHONPATH=/path/to/other/tree .venv/bin/python benchmarks/metric_path_calls.py    # another revision
"""

from __future__ import annotations

import argparse
import collections
import sys
from typing import Optional, Sequence, Tuple

#: the files of the metric path, relative to the repository root
PATH_FILES = ("rlearn/monitor/", "rlearn/logging/", "rlearn/learner/", "rlearn/hooks/log_show.py",
              "rlearn/distributed/reduce.py", "rlearn/writers/base.py")


def count_calls(n_keys: int) -> Tuple[collections.Counter, int]:
    """Calls per function (``file:name``) inside the metric path during one log of DQN's declared keys and
    ``n_keys`` more, all with values, and the number of keys the log shows."""
    import gymnasium as gym

    from policies.dqn import DQNPolicy
    from rlearn.hooks.log_show import LogShowHook
    from rlearn.learner import BaseLearner

    env = gym.make("CartPole-v1")
    policy = DQNPolicy({}, env.observation_space, env.action_space, seed=0)
    learner = BaseLearner(policy, {"log_freq": 10**6, "monitor_window": 20}, writers=[])
    learner.declare_monitor_vars([f"loss/{i}" for i in range(n_keys)])
    keys = [key for key in learner.monitor_vars() if not key.startswith("cur_lr")]  # the learner records cur_lr
    policy._forward_learn = lambda data: {key: float(i) for i, key in enumerate(keys)}
    hook = LogShowHook(freq=10**6)
    learner.register_hook(hook)
    for _ in range(20):
        learner.train(None)
    root = str(__import__("rlearn").__file__).rsplit("rlearn/", 1)[0]
    calls: collections.Counter = collections.Counter()

    def profile(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(root) and path[len(root):].startswith(PATH_FILES):
                calls[f"{path[len(root):]}:{frame.f_code.co_name}"] += 1

    sys.setprofile(profile)
    try:
        hook.log(learner)
    finally:
        sys.setprofile(None)
    return calls, len(learner.monitor_vars())


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=12)
    parser.add_argument("--top", type=int, default=15, help="the functions called most, shown")
    args = parser.parse_args(argv)
    calls, shown = count_calls(args.keys)
    total = sum(calls.values())
    print(f"{total} calls in the metric path for one log of {shown} keys: {total / shown:.1f} per key")
    for name, n in calls.most_common(args.top):
        print(f"  {n:5d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
