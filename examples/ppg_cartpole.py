"""Train PPG (Phasic Policy Gradient) on CartPole-v1 and show where the results are.

    python examples/ppg_cartpole.py                       # 100k env steps (under a minute on an idle core)
    python examples/ppg_cartpole.py --steps 30000 --seed 1 --work-dir work_dirs/ppg_demo
    python examples/ppg_cartpole.py --profile             # also record a timeline trace

The same run from the command line: ``rlearn train ppg_cartpole``. Every 16 train iterations (one auxiliary
phase) the log shows a table of the policy-phase metrics (``policy_loss``, ``value_loss``, ``entropy``,
``approx_kl``, ``clipfrac``, ``explained_variance``, ``cur_lr``) and of the auxiliary-phase ones
(``aux_value_loss``, ``behavioral_cloning_loss``, ``auxiliary_loss``), which exist only on every 16th
iteration and are averaged over the auxiliary phases in the window. TensorBoard gets the same curves under
``learner_iter/`` and ``learner_step/``, and the evaluations under ``evaluator_step/``. See docs/ppg.md.
"""

from __future__ import annotations

import argparse
import math
from typing import Optional, Sequence

from rlearn.config import load_config
from rlearn.run import train


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="PPG on CartPole-v1 with rlearn")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps to train (default 100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="default: work_dirs/ppg_cartpole_seed<seed>")
    parser.add_argument("--profile", action="store_true", help="record a timeline trace (rlearn trace WORK_DIR)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --work-dir from its latest checkpoint")
    args = parser.parse_args(argv)

    cfg = load_config("ppg_cartpole", overrides=[f"train.max_env_steps={args.steps}", f"seed={args.seed}",
                                                 f"profile={args.profile}"])
    # the bundled config decays the learning rate linearly to 0 over its 100k steps: stretch it to --steps
    per_iteration = cfg["env"]["num_envs"] * cfg["policy"]["rollout_steps"]
    for hook in cfg["learner"]["hooks"]:
        if hook["type"] == "LRSchedulerHook":
            hook["scheduler"]["total_iters"] = math.ceil(args.steps / per_iteration)
    work_dir = args.work_dir or f"work_dirs/ppg_cartpole_seed{args.seed}"
    result = train(cfg, work_dir=work_dir, resume=True if args.resume else None)

    final = result.last_eval["episode_return_mean"] if result.last_eval else float("nan")
    print(f"\nfinal evaluation return: {final:.1f} (random policy: about 22; maximum: 500)")
    print(f"log table:   {result.log_file}")
    print(f"TensorBoard: tensorboard --logdir {result.tb_dir}   (then open http://localhost:6006)")
    print(f"checkpoint:  {result.latest_checkpoint}")
    if result.trace_dir is not None:
        print(f"trace:       rlearn trace {result.work_dir} -o trace.json   (open it in https://ui.perfetto.dev)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
