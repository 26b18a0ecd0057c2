"""``RunResult`` (what a run did and where its files are) and the summary lines that close its log."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlearn.config.loading import imports_named

__all__ = ["RunResult", "summary_lines", "MAX_ENV_STEPS", "STOP_VALUE", "NO_IMPROVEMENT", "INTERRUPTED"]

#: stop reasons
MAX_ENV_STEPS, STOP_VALUE, NO_IMPROVEMENT, INTERRUPTED = "max_env_steps", "stop_value", "no_improvement", "interrupted"


@dataclass
class RunResult:
    """What a run did and where its files are. ``stop_reason``: ``"max_env_steps"``, ``"stop_value"``,
    ``"no_improvement"`` (``eval.patience`` used up) or ``"interrupted"`` (by ``stop_signal``; a checkpoint was
    saved); ``best_eval``: ``{"episode_return_mean", "envstep", "train_iter"}`` of the best evaluation;
    ``failed_writers``: writers switched off because they could not write (name -> error); ``already_complete``:
    ``--resume`` found the run complete, so nothing ran (the counters are the checkpoint's)."""

    work_dir: Path
    exp_name: str
    train_iter: int
    envstep: int
    stop_reason: str
    last_eval: Optional[Dict[str, float]]
    log_file: Path
    tb_dir: Path
    ckpt_dir: Path
    latest_checkpoint: Optional[Path]
    config_file: Path
    trace_dir: Optional[Path] = None
    best_checkpoint: Optional[Path] = None
    best_eval: Optional[Dict[str, Any]] = None
    config: Dict[str, Any] = field(default_factory=dict, repr=False)
    stop_signal: Optional[str] = None
    failed_writers: Dict[str, str] = field(default_factory=dict)
    already_complete: bool = False

    @property
    def interrupted(self) -> bool:
        return self.stop_reason == INTERRUPTED


def summary_lines(result: RunResult) -> List[str]:
    """The closing lines of a run: why it stopped and where every file is, with commands that paste and run."""
    from rlearn.executables import shell_command

    lines = [
        f"{result.exp_name}: stopped ({result.stop_reason}) at train_iter {result.train_iter}, envstep {result.envstep}"
        + (f", last eval return {result.last_eval['episode_return_mean']:.4g}" if result.last_eval else ""),
        f"  log:         {result.log_file}",
        f"  TensorBoard: {result.tb_dir}    (view: {shell_command('tensorboard', '--logdir', result.tb_dir)})",
        f"  checkpoint:  {result.latest_checkpoint or '(none)'}",
    ]
    if result.best_checkpoint is not None and result.best_eval is not None:
        allow = ["--allow-imports"] if imports_named(result.config) else []  # eval imports a config's code if asked
        play = shell_command("rlearn", "eval", result.work_dir, *allow)
        lines.append(f"  best:        {result.best_checkpoint}    (eval return "
                     f"{result.best_eval['episode_return_mean']:.4g} at envstep {result.best_eval['envstep']}; "
                     f"play it: {play})")
    lines.append(f"  config:      {result.config_file}")
    if result.trace_dir is not None:
        lines.append(f"  trace:       {result.trace_dir}    (merge: "
                     f"{shell_command('rlearn', 'trace', result.work_dir, '-o', 'trace.json')})")
    for name, error in result.failed_writers.items():
        lines.append(f"  writer off:  {name} could not write ({error}); its output stops where it failed")
    if result.interrupted:
        lines.append("  resume with: " + shell_command("rlearn", "train", result.config_file, "--work-dir",
                                                        result.work_dir, "--resume"))
    return lines
