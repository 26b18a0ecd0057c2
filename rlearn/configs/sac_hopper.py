"""SAC on Hopper-v5 with the settings of ``sac_halfcheetah`` (rl-baselines3-zoo's ``hyperparams/sac.yml``
``&mujoco-defaults``, which ``Hopper-v3`` uses too), 1M env steps (needs the ``mujoco`` extra). The zoo's result
with them: 2,326 +- 1,130 on Hopper-v3 after 1M steps (``benchmark.md``).

``rlearn train sac_hopper`` trains it (``pip install -e ".[mujoco]"`` first); docs/mujoco.md.
"""

from rlearn.configs._mujoco import sac

config = sac("Hopper-v5")
