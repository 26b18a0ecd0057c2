"""Vectorised gymnasium environments in ``AutoresetMode.SAME_STEP``, as rlearn's collector and evaluator expect:
the ``step`` that ends an episode returns the *reset* observation in ``obs`` and the *final* one in
``info["final_obs"][i]`` (mask ``info["_final_obs"]``), so each step is one real transition.
"""

from __future__ import annotations

import difflib
import functools
import multiprocessing
import sys
from typing import Any, Callable, Mapping, Optional, Union

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from rlearn.values import check_int

EnvFactory = Callable[..., gym.Env]
EnvId = Union[str, EnvSpec, EnvFactory]

#: multiprocessing start method for ``asynchronous=True``; neither forks the (torch-holding) parent process,
#: so the environment factory must be importable or picklable in a fresh interpreter, and a script must guard
#: its entry point with ``if __name__ == "__main__":``.
DEFAULT_ASYNC_CONTEXT = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def register_env(env_id: str, entry_point: Union[str, EnvFactory], *, max_episode_steps: Optional[int] = None,
                 kwargs: Optional[Mapping[str, Any]] = None, override: bool = False) -> None:
    """Register a custom environment with gymnasium so a config can name it ``env_id`` (``"MyEnv-v0"``).

    ``entry_point`` is the environment class or factory, or an import string ``"package.module:Class"``;
    ``max_episode_steps`` wraps it in ``TimeLimit`` (*truncated* episodes), ``kwargs`` are the constructor's
    defaults; a taken id is an error unless ``override`` (gymnasium would only warn).
    """
    if not isinstance(env_id, str) or not env_id:
        raise TypeError(f"register_env: env_id must be a non-empty str, got {env_id!r}")
    if not (isinstance(entry_point, str) or callable(entry_point)):
        raise TypeError(f"register_env({env_id!r}): entry_point must be a callable or an import string")
    if env_id in gym.registry and not override:
        raise ValueError(f"register_env: environment id {env_id!r} is already registered (pass override=True)")
    gym.registry.pop(env_id, None)
    gym.register(env_id, entry_point=entry_point, max_episode_steps=max_episode_steps, kwargs=dict(kwargs or {}))


def resolve_env_spec(env_id: str) -> EnvSpec:
    """The registered :class:`EnvSpec` of ``env_id``; an unknown id is a ``ValueError`` naming it."""
    if not isinstance(env_id, str):
        raise TypeError(f"environment id must be a str, got {type(env_id).__name__}")
    try:
        return gym.spec(env_id)
    except gym.error.Error as exc:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f" Registered ids close to it: {', '.join(repr(c) for c in close)}." if close else ""
        raise ValueError(f"unknown environment id {env_id!r}: {exc}{hint} Register custom environments with "
                         "rlearn.env.register_env or gymnasium.register, or pass a callable that builds the "
                         "environment.") from exc


#: what to install for the environments of an optional gymnasium dependency, by entry-point package
INSTALL_HINTS = {"gymnasium.envs.mujoco": 'MuJoCo, which is not installed: pip install -e ".[mujoco]"'}


def check_dependencies(spec: EnvSpec) -> None:
    """Import the module of ``spec``'s entry point, so that a missing optional dependency (MuJoCo, Box2D...)
    is a ``ValueError`` that says what to install, before any environment or worker process starts."""
    if not isinstance(spec.entry_point, str) or ":" not in spec.entry_point:
        return
    try:
        gym.envs.registration.load_env_creator(spec.entry_point)
    except gym.error.DependencyNotInstalled as exc:
        module = spec.entry_point.split(":")[0]
        hint = next((text for package, text in INSTALL_HINTS.items()
                     if module == package or module.startswith(package + ".")), None)
        raise ValueError(f"environment {spec.id!r} needs {hint}" if hint else
                         f"environment {spec.id!r} needs a package that is not installed: {exc}") from None


def _build_env(env: Union[EnvSpec, EnvFactory], env_kwargs: Mapping[str, Any], seed: Optional[int]) -> gym.Env:
    """Build one sub-environment behind an :class:`~rlearn.env.checks.ObservationShapeCheck` and seed it (in the
    worker process for asynchronous envs)."""
    from rlearn.env.checks import ObservationShapeCheck

    if isinstance(env, EnvSpec):
        instance, name = gym.make(env, **env_kwargs), env.id
    else:
        instance, name = env(**env_kwargs), getattr(env, "__qualname__", repr(env))
        if not isinstance(instance, gym.Env):
            raise TypeError(f"environment factory {name} returned {type(instance).__name__}, not a gymnasium.Env")
    instance = ObservationShapeCheck(instance, name)
    if seed is not None:
        # Seeds the environment's own generator once; later resets without a seed continue from it.
        instance.reset(seed=seed)
        instance.action_space.seed(seed)
        instance.observation_space.seed(seed)
    return instance


def make_env_fn(env_id: EnvId, seed: Optional[int] = None,
                env_kwargs: Optional[Mapping[str, Any]] = None) -> Callable[[], gym.Env]:
    """A zero-argument callable (picklable when ``env_id`` is) that builds, and given ``seed`` seeds, one
    environment; an id is resolved here, so an unknown one fails before any worker starts."""
    if env_kwargs is not None and not isinstance(env_kwargs, Mapping):
        raise TypeError(f"env_kwargs must be a mapping, got {type(env_kwargs).__name__}")
    if isinstance(env_id, str):
        target: Union[EnvSpec, EnvFactory] = resolve_env_spec(env_id)
        check_dependencies(target)
    elif isinstance(env_id, EnvSpec) or callable(env_id):
        target = env_id
    else:
        raise TypeError(f"env must be a gymnasium id, an EnvSpec or a callable, got {type(env_id).__name__}")
    return functools.partial(_build_env, target, dict(env_kwargs or {}), seed)


def make_vector_env(env_id: EnvId, num_envs: int, seed: Optional[int] = None, asynchronous: bool = False,
                    env_kwargs: Optional[Mapping[str, Any]] = None, context: Optional[str] = None,
                    copy: bool = True) -> VectorEnv:
    """Build ``num_envs`` copies of ``env_id`` (a gymnasium id, an ``EnvSpec`` or a callable
    ``factory(**env_kwargs) -> gym.Env``) as one vector environment in ``AutoresetMode.SAME_STEP``.

    Sub-environment ``i`` is seeded with ``seed + i`` (reset generator and spaces), the batched action space with
    ``seed``. ``asynchronous`` runs one worker process per sub-environment (start method ``context``, default
    :data:`DEFAULT_ASYNC_CONTEXT`); ``copy=False`` returns the observation batch itself, which the next call
    overwrites (saves a copy per step for a :class:`~rlearn.collect.Collector`).
    """
    check_int("num_envs", num_envs)
    check_seed(seed)
    fns = [make_env_fn(env_id, None if seed is None else seed + i, env_kwargs) for i in range(num_envs)]
    if asynchronous:
        ctx = context or DEFAULT_ASYNC_CONTEXT
        if ctx not in multiprocessing.get_all_start_methods():
            raise ValueError(f"multiprocessing context {ctx!r} is not available here")
        _pickle_user_files_by_value()
        try:
            env: VectorEnv = AsyncVectorEnv(fns, context=ctx, autoreset_mode=AutoresetMode.SAME_STEP, copy=bool(copy))
        except (ConnectionError, EOFError) as exc:  # a worker died before it could report anything
            raise ValueError(
                f"asynchronous=True: an environment worker process died while starting ({type(exc).__name__}: "
                f"{exc}); its own error is printed above. A worker is a fresh Python process ({ctx!r} start "
                "method): the environment must be importable or picklable there (register it in an installed "
                "module or a custom_imports file, not in a script's __main__). Set env.asynchronous=False to see "
                "the error in this process") from exc
    else:
        env = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP, copy=bool(copy))
    if seed is not None:
        env.action_space.seed(seed)
    return env


def _pickle_user_files_by_value() -> None:
    """Have cloudpickle (gymnasium's way to send factories to workers) pickle what the executed config and
    ``custom_imports`` files define by value: their modules exist only in this process."""
    loading = sys.modules.get("rlearn.config.loading")  # no config file was executed if it was never imported
    if loading is None:
        return
    import cloudpickle

    for module in loading.user_modules():
        cloudpickle.register_pickle_by_value(module)


def check_seed(seed: Any, owner: str = "") -> None:
    """Raise ``ValueError`` (prefixed with ``owner``) unless ``seed`` is a non-negative int or None."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ValueError(f"{owner + ': ' if owner else ''}seed must be a non-negative int or None, got {seed!r}")


def check_same_step_autoreset(env: Any, owner: str) -> None:
    """Raise a clear error unless ``env`` is a gymnasium vector env in ``AutoresetMode.SAME_STEP``."""
    if not isinstance(env, VectorEnv):
        raise TypeError(f"{owner} needs a gymnasium.vector.VectorEnv (build one with rlearn.env.make_vector_env), "
                        f"got {type(env).__name__}")
    mode = env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.SAME_STEP:
        raise ValueError(f"{owner} needs a vector env with autoreset_mode=AutoresetMode.SAME_STEP (so every step is "
                         f"a real transition and the final observation is in info['final_obs']), got {mode!r}; "
                         "build it with rlearn.env.make_vector_env")


def observation_dtype(space: gym.Space, owner: str) -> np.dtype:
    """The dtype rlearn stores observations of ``space`` in: the space's own integer dtype (``Discrete``,
    ``MultiDiscrete``, ``MultiBinary``, uint8 images...), ``float32`` for a float ``Box``; other spaces are refused."""
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)):
        dtype = np.dtype(space.dtype)
        if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
            return dtype
        if np.issubdtype(dtype, np.floating):
            return np.dtype(np.float32)
    raise TypeError(
        f"{owner}: observation space {space} is not supported; rlearn stores Box, Discrete, MultiDiscrete "
        f"and MultiBinary observations (flatten Dict/Tuple spaces with gymnasium.wrappers.FlattenObservation)"
    )


def derive_seed(seed: Optional[int], k: int) -> Optional[int]:
    """The reset seed of the ``k``-th seeded reset of a component whose base seed is ``seed``: ``seed`` itself
    for ``k = 0``, then ``SeedSequence([seed, k])`` (never ``seed + i`` by arithmetic); ``None`` stays ``None``."""
    if seed is None:
        return None
    if k == 0:
        return seed
    return int(np.random.SeedSequence([seed, k]).generate_state(1, np.uint32)[0])
