"""Train SAC on Pendulum-v1 and show where the results are.

    python examples/sac_pendulum.py                      # 20k env steps (a few minutes on 2 cores)
    python examples/sac_pendulum.py --steps 12000 --seed 1 --work-dir work_dirs/sac_demo

The same run from the command line: ``rlearn train sac_pendulum --set train.max_env_steps=12000``.
Every 1000 train iterations the log shows a table of the SAC metrics (critic losses, Q values, TD error,
and the delayed ``actor_loss``, ``entropy``, ``alpha`` and ``alpha_loss``, which exist only on actor
iterations); TensorBoard gets the same curves under
``learner_iter/`` and ``learner_step/``, and the evaluations under ``evaluator_step/``. See docs/sac.md.
"""

from __future__ import annotations

import argparse
from typing import Optional, Sequence

from rlearn.config import load_config
from rlearn.run import train


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="SAC on Pendulum-v1 with rlearn")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps to train (default 20000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="default: work_dirs/sac_pendulum_seed<seed>")
    parser.add_argument("--resume", action="store_true", help="continue the run in --work-dir from its latest checkpoint")
    args = parser.parse_args(argv)

    cfg = load_config("sac_pendulum", overrides=[f"train.max_env_steps={args.steps}", f"seed={args.seed}"])
    work_dir = args.work_dir or f"work_dirs/sac_pendulum_seed{args.seed}"
    result = train(cfg, work_dir=work_dir, resume=True if args.resume else None)

    final = result.last_eval["episode_return_mean"] if result.last_eval else float("nan")
    print(f"\nfinal evaluation return: {final:.1f} (random policy: about -1200; solved: above -200)")
    print(f"log table:   {result.log_file}")
    print(f"TensorBoard: tensorboard --logdir {result.tb_dir}   (then open http://localhost:6006)")
    print(f"checkpoint:  {result.latest_checkpoint}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
