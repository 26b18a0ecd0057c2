"""TD3 on Walker2d-v5 with rl-baselines3-zoo's MuJoCo settings, 1M env steps (needs the ``mujoco`` extra).

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/td3.yml``, section "=== Mujoco Envs ===", ``Walker2d-v3: <<:
*mujoco-defaults``: the settings of ``td3_halfcheetah`` ([400, 300], lr 1e-3, batch 256, 10,000 random steps,
exploration noise 0.1). The zoo's result with them: 4,718 +- 46 on Walker2d-v3 after 1M steps (``benchmark.md``).

``rlearn train td3_walker2d`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import td3

config = td3("Walker2d-v5")
