"""SAC on Walker2d-v5 with the settings of ``sac_halfcheetah`` (rl-baselines3-zoo's ``hyperparams/sac.yml``
``&mujoco-defaults``, which ``Walker2d-v3`` uses too), 1M env steps (needs the ``mujoco`` extra). The zoo's result
with them: 3,863 +- 254 on Walker2d-v3 after 1M steps (``benchmark.md``).

``rlearn train sac_walker2d`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import sac

config = sac("Walker2d-v5")
