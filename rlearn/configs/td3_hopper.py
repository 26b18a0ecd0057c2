"""TD3 on Hopper-v5 with rl-baselines3-zoo's MuJoCo settings (lr 3e-4), 1M env steps (needs the ``mujoco`` extra).

Source: DLR-RM/rl-baselines3-zoo ``hyperparams/td3.yml``, section "=== Mujoco Envs ===", ``Hopper-v3: <<:
*mujoco-defaults`` with its "SAC Hyperparams" (``learning_rate 3e-4``, ``batch_size 256``, ``train_freq 1``,
``gradient_steps 1``): the settings of ``td3_halfcheetah`` with lr 3e-4 (TD3Policy's default, so not restated).
The zoo's result with them: 3,606 +- 4 on Hopper-v3 after 1M steps (``benchmark.md``).

``rlearn train td3_hopper`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import td3

config = td3("Hopper-v5")
del config["policy"]["lr_actor"], config["policy"]["lr_critic"]  # lr 3e-4 for actor and critics
