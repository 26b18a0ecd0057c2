"""Train PPO on CartPole-v1 with rl-zoo's settings and show where the results are.

    python examples/ppo_cartpole.py                       # 100k env steps (about 20 s on an idle core)
    python examples/ppo_cartpole.py --steps 30000 --seed 1 --work-dir work_dirs/ppo_demo
    python examples/ppo_cartpole.py --target-kl 0.01      # stop an update's epochs early (early_stop_epoch)
    python examples/ppo_cartpole.py --profile             # also record a timeline trace

The same run from the command line: ``rlearn train ppo_cartpole`` (``--set policy.target_kl=0.01``).
Every 10 updates the log shows a table of ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``,
``clipfrac``, ``explained_variance`` and ``cur_lr`` (each averaged over the 10 updates) and, with a
``target_kl``, ``early_stop_epoch``: averaged over the updates in the window that stopped early, ``-`` when
none did. TensorBoard gets the same curves under ``learner_iter/`` and ``learner_step/``, and the
evaluations under ``evaluator_step/``. See docs/ppo.md.
"""

from __future__ import annotations

import argparse
import math
from typing import Optional, Sequence

from rlearn.config import load_config
from rlearn.run import train


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="PPO on CartPole-v1 with rlearn")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps to train (default 100000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-kl", type=float, default=None, help="early-stop threshold (default: none)")
    parser.add_argument("--work-dir", default=None, help="default: work_dirs/ppo_cartpole_seed<seed>")
    parser.add_argument("--profile", action="store_true", help="record a timeline trace (rlearn trace WORK_DIR)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --work-dir from its latest checkpoint")
    args = parser.parse_args(argv)

    cfg = load_config("ppo_cartpole", overrides=[f"train.max_env_steps={args.steps}", f"seed={args.seed}",
                                                 f"profile={args.profile}", f"policy.target_kl={args.target_kl}"])
    # the bundled config decays the learning rate (and clip range) linearly to 0 over its 100k steps: stretch it
    per_update = cfg["env"]["num_envs"] * cfg["policy"]["rollout_steps"]
    for hook in cfg["learner"]["hooks"]:
        if hook["type"] == "LRSchedulerHook":
            hook["scheduler"]["total_iters"] = math.ceil(args.steps / per_update)
    work_dir = args.work_dir or f"work_dirs/ppo_cartpole_seed{args.seed}"
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
