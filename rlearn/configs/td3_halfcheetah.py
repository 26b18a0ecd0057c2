"""TD3 on HalfCheetah-v5 with rl-baselines3-zoo's MuJoCo settings, 1M env steps (needs the ``mujoco`` extra).

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/td3.yml``, section "=== Mujoco Envs ===", ``HalfCheetah-v3:
&mujoco-defaults`` (``n_timesteps 1e6``, ``learning_starts 10000``, ``noise_type normal``, ``noise_std 0.1``) on
SB3's TD3 defaults ([400, 300], lr 1e-3, batch 256, buffer 1e6, gamma 0.99, tau 0.005, ``policy_delay 2``,
target noise 0.2 / clip 0.5, one gradient step per env step); the zoo's later ``HalfCheetah-v4`` entry states
the same values. The zoo's result with them: 9,656 +- 970 on HalfCheetah-v3 after 1M steps (``benchmark.md``).

``rlearn train td3_halfcheetah`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import td3

config = td3("HalfCheetah-v5")
