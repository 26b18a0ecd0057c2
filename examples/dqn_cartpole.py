"""Train DQN on CartPole-v1 (rl-zoo settings) and show where the results are.

    python examples/dqn_cartpole.py                          # 50k env steps (a few minutes on 2 cores)
    python examples/dqn_cartpole.py --steps 20000 --seed 1 --double-q --work-dir work_dirs/dqn_demo

The same run from the command line: ``rlearn train dqn_cartpole --set train.max_env_steps=20000``.
Every 512 train iterations the log shows a table of the DQN metrics (``q_loss``, ``q_value``,
``target_q_value``, ``grad_norm``, and ``target_sync``, which exists only on the iterations that refreshed the
target network); TensorBoard gets the same curves under ``learner_iter/`` and ``learner_step/``, and the
evaluations under ``evaluator_step/``. See docs/dqn.md.
"""

from __future__ import annotations

import argparse
from typing import Optional, Sequence

from rlearn.config import load_config
from rlearn.run import train


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="DQN on CartPole-v1 with rlearn")
    parser.add_argument("--steps", type=int, default=50_000, help="env steps to train (default 50000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--double-q", action="store_true", help="use the double-DQN target")
    parser.add_argument("--stop-at", type=float, default=None, help="stop once an evaluation reaches this return")
    parser.add_argument("--work-dir", default=None, help="default: work_dirs/dqn_cartpole_seed<seed>")
    args = parser.parse_args(argv)

    overrides = [f"train.max_env_steps={args.steps}", f"seed={args.seed}", f"policy.double_q={args.double_q}"]
    if args.stop_at is not None:
        overrides.append(f"eval.stop_value={args.stop_at}")
    cfg = load_config("dqn_cartpole", overrides=overrides)
    work_dir = args.work_dir or f"work_dirs/dqn_cartpole_seed{args.seed}"
    result = train(cfg, work_dir=work_dir)

    final = result.last_eval["episode_return_mean"] if result.last_eval else float("nan")
    print(f"\nfinal evaluation return: {final:.1f} (random policy: about 20; maximum: 500)")
    print(f"log table:   {result.log_file}")
    print(f"TensorBoard: tensorboard --logdir {result.tb_dir}   (then open http://localhost:6006)")
    print(f"checkpoint:  {result.latest_checkpoint}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
