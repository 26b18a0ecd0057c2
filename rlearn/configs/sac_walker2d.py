"""SAC on Walker2d-v5 with rl-baselines3-zoo's MuJoCo settings, 1M env steps (needs the ``mujoco`` extra).

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/sac.yml``, section "=== Mujoco Envs ===", ``HalfCheetah-v3:
&mujoco-defaults`` (``n_timesteps 1e6``, ``learning_starts 10000``; Hopper-v3 and Walker2d-v3 the same) on
SB3's SAC defaults: [256, 256], lr 3e-4 (actor, critics, temperature), batch 256, buffer 1e6, gamma 0.99, tau
0.005, automatic temperature, one gradient step per env step. rlearn's SAC updates the actor twice every
second iteration (``policy_frequency = 2``, CleanRL's): as many actor updates as SB3's. The zoo's result with
them: 3,863 +- 254 on Walker2d-v3 after 1M steps (``benchmark.md``).

``rlearn train sac_walker2d`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import sac

config = sac("Walker2d-v5")
