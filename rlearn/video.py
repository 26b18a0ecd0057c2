"""Videos of a policy: one episode of the deterministic policy on an ``rgb_array``-rendering environment, as an
MP4 (:class:`VideoRecorder`, for ``eval.video`` and ``rlearn eval --video``). Rendering (pygame for classic control)
and encoding (imageio-ffmpeg) come with ``pip install 'rlearn[video]'``: see :func:`require_video_support`.
"""

from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence, Union

import numpy as np

from rlearn.values import check_int, is_real

__all__ = ["VIDEO_EXTRA_HINT", "VideoUnavailable", "require_video_support", "EpisodeVideo", "VideoRecorder",
           "record_episode", "write_mp4", "video_file_name", "encode_gif", "gif_timing", "GIF_MAX_SIDE",
           "GIF_MIN_DELAY_CS"]

#: what to install for videos
VIDEO_EXTRA_HINT = "pip install 'rlearn[video]' (imageio, imageio-ffmpeg and pygame)"

#: frames per second when the environment's metadata has no ``render_fps``
DEFAULT_FPS = 30
#: :func:`encode_gif` shrinks frames by a whole factor until their longer side is at most this many pixels
GIF_MAX_SIDE = 256
#: the shortest frame delay, in hundredths of a second, that browsers play as written (they play 0 or 1 as 10)
GIF_MIN_DELAY_CS = 2


class VideoUnavailable(ImportError):
    """A package needed for videos is missing; the message names it and the extra to install."""


def require_video_support(env_id: Optional[str] = None) -> None:
    """Raise :class:`VideoUnavailable` unless imageio and its ffmpeg plugin can be imported, and pygame too
    when ``env_id`` names an environment that renders with it (gymnasium's classic-control ones)."""
    needed = ["imageio", "imageio_ffmpeg"]
    if env_id is not None and _uses_pygame(env_id):
        needed.append("pygame")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # pygame greets on stdout otherwise
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # headless: rgb_array frames need no window, and SDL would complain about the missing display
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    missing = []
    for module in needed:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module.replace("_", "-"))
    if missing:
        which = "is" if len(missing) == 1 else "are"
        raise VideoUnavailable(f"videos need {', '.join(missing)}, which {which} not installed: {VIDEO_EXTRA_HINT}")


def _uses_pygame(env_id: str) -> bool:
    """True for environments whose renderer is pygame (gymnasium's classic-control and box2d ones)."""
    try:
        from rlearn.env.vector_env import resolve_env_spec

        entry = resolve_env_spec(env_id).entry_point
    except Exception:  # an unknown id is reported by the environment builder, not here
        return False
    name = entry if isinstance(entry, str) else getattr(entry, "__module__", "")
    return name.startswith(("gymnasium.envs.classic_control", "gymnasium.envs.box2d", "gymnasium.envs.toy_text"))


def video_file_name(envstep: int) -> str:
    """``envstep_<envstep>.mp4``, zero-padded to 10 digits so the files sort in order."""
    return f"envstep_{int(envstep):010d}.mp4"


@dataclass
class EpisodeVideo:
    """One recorded episode: the MP4 ``path``, ``frames`` (``length + 1``: the first observation's, then one per
    step), frame ``size`` ``(height, width)``, the ``images`` (H x W x 3 uint8; None if not kept)."""

    path: Path
    frames: int
    episode_return: float
    length: int
    size: tuple
    images: Optional[Sequence[np.ndarray]] = field(default=None, repr=False)
    fps: float = DEFAULT_FPS


def record_episode(env: Any, policy: Any, seed: Optional[int] = None, max_steps: int = 100_000) -> tuple:
    """Play one episode of the single (not vector) ``rgb_array`` environment ``env`` with ``policy._forward_eval``
    (observations batched as from a vector env of one); returns ``(frames, episode_return, length)``."""
    from rlearn.arrays import to_numpy
    from rlearn.env import observation_dtype

    if getattr(env, "render_mode", None) != "rgb_array":
        raise ValueError(f"record_episode needs an environment made with render_mode='rgb_array', got "
                         f"render_mode={getattr(env, 'render_mode', None)!r}")
    obs_dtype = observation_dtype(env.observation_space, "record_episode")
    obs, _ = env.reset(seed=seed)
    frames: List[np.ndarray] = [_frame(env)]
    total, length = 0.0, 0
    while length < max_steps:
        batch = np.asarray(obs, dtype=obs_dtype)[None]
        action = to_numpy(policy._forward_eval(batch), copy=False)[0]
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        length += 1
        frames.append(_frame(env))
        if terminated or truncated:
            break
    return frames, total, length


def _frame(env: Any) -> np.ndarray:
    frame = env.render()
    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] not in (3, 4) or array.dtype != np.uint8:
        raise ValueError(f"env.render() returned {type(frame).__name__} of shape {getattr(array, 'shape', None)} "
                         f"and dtype {getattr(array, 'dtype', None)}; expected an RGB(A) uint8 image")
    return array[:, :, :3]


def write_mp4(path: Union[str, Path], frames: Sequence[np.ndarray], fps: float = DEFAULT_FPS) -> Path:
    """Encode ``frames`` (H x W x 3 uint8, all the same size) as an H.264 MP4 at ``path`` (parents created),
    written under a temporary name and renamed, so a reader never sees half a video."""
    require_video_support()
    import imageio.v2 as imageio

    if not frames:
        raise ValueError("write_mp4: no frames")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial.mp4")
    # macro_block_size=2: frames keep their size unless a side is odd (H.264 in yuv420p needs even sides)
    with imageio.get_writer(partial, format="FFMPEG", fps=fps, codec="libx264", pixelformat="yuv420p",
                            macro_block_size=2, ffmpeg_log_level="error") as writer:
        for frame in frames:
            writer.append_data(np.ascontiguousarray(frame))
    partial.replace(path)
    return path


def gif_timing(n_frames: int, fps: float) -> tuple:
    """``(indices, delays)``: which of ``n_frames`` frames played at ``fps`` a GIF keeps, and each one's delay in
    hundredths of a second. Delays are differences of rounded start times, so they add up to the video's length
    (30 fps: 3, 3, 4, ...); above 50 fps every ``n``-th frame is kept so no delay is below :data:`GIF_MIN_DELAY_CS`.
    """
    if not is_real(fps) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"encode_gif: fps must be a positive number, got {fps!r}")
    fps = float(fps)
    step = max(1, math.ceil(GIF_MIN_DELAY_CS * fps / 100 - 1e-9))
    indices = list(range(0, n_frames, step))
    starts = [round(100 * i / fps) for i in indices] + [round(100 * n_frames / fps)]
    delays = [max(GIF_MIN_DELAY_CS, end - start) for start, end in zip(starts, starts[1:])]
    return indices, delays


def encode_gif(frames: Sequence[np.ndarray], fps: float = DEFAULT_FPS, max_side: int = GIF_MAX_SIDE) -> tuple:
    """Encode ``frames`` (H x W x 3 uint8, all the same size) as a looping GIF playing at ``fps`` (what
    TensorBoard's Images dashboard shows), shrunk by the smallest whole factor that brings their longer side to
    ``max_side`` pixels or less (500 x 500 becomes 250 x 250); returns ``(gif bytes, height, width)``."""
    import io

    from PIL import Image

    if not frames:
        raise ValueError("encode_gif: no frames")
    check_int("encode_gif: max_side", max_side)
    first = np.asarray(frames[0])
    if first.ndim != 3 or first.shape[2] != 3 or first.dtype != np.uint8:
        raise ValueError(f"encode_gif: frames must be H x W x 3 uint8 images, got shape {first.shape} and "
                         f"dtype {first.dtype}")
    indices, delays = gif_timing(len(frames), fps)
    factor = -(-max(first.shape[:2]) // max_side)  # ceil
    images = [Image.fromarray(np.ascontiguousarray(np.asarray(frames[i])[::factor, ::factor])) for i in indices]
    buffer = io.BytesIO()
    # Pillow takes milliseconds and stores whole hundredths: multiples of 10 are stored exactly
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:],
                   duration=[10 * delay for delay in delays], loop=0)
    return buffer.getvalue(), images[0].height, images[0].width


class VideoRecorder:
    """Records episodes of ``policy`` (anything with ``_forward_eval(obs [1, ...])``) on its own environment,
    ``gymnasium.make(env_id, render_mode="rgb_array", **env_kwargs)``, made on first use."""

    def __init__(self, env_id: str, policy: Any, env_kwargs: Optional[Mapping[str, Any]] = None,
                 seed: Optional[int] = None) -> None:
        require_video_support(env_id)
        self.env_id = env_id
        self.policy = policy
        self.env_kwargs = dict(env_kwargs or {})
        self.seed = seed
        self.env: Any = None

    def record(self, path: Union[str, Path], k: int = 0) -> EpisodeVideo:
        """Play one episode, reset with ``derive_seed(seed, k)`` (``seed`` None: unseeded; the EvalHook passes the
        envstep, so a resumed run films the same episodes), and write it to ``path``."""
        import gymnasium as gym

        from rlearn.env.vector_env import derive_seed

        if self.env is None:
            self.env = gym.make(self.env_id, render_mode="rgb_array", **self.env_kwargs)
        env = self.env
        frames, total, length = record_episode(env, self.policy, seed=derive_seed(self.seed, k))
        fps = (getattr(env, "metadata", None) or {}).get("render_fps") or DEFAULT_FPS
        written = write_mp4(path, frames, fps=fps)
        return EpisodeVideo(written, len(frames), total, length, tuple(frames[0].shape[:2]), images=frames, fps=fps)

    def close(self) -> None:
        """Close the environment (a later :meth:`record` makes a new one)."""
        if self.env is not None:
            self.env.close()
            self.env = None
