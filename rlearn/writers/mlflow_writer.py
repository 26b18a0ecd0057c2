"""``MlflowWriter``: MLflow tracking (``pip install 'rlearn[mlflow]'``).

Every value is a metric at ``step = train_iter``; the env-step axis is the metric ``envstep`` at the same
step. The resolved config is logged as parameters (dotted keys; lists and dicts as JSON). See docs/writers.md.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Union

from rlearn.writers.rowfile import Row
from rlearn.writers.tracking import TrackingWriter

__all__ = ["MlflowWriter"]

#: the most metrics, and parameters, MLflow takes in one log_batch
_METRICS_PER_BATCH = 1000
_PARAMS_PER_BATCH = 100
#: MLflow refuses longer parameter values than this
_PARAM_VALUE_LIMIT = 6000


class MlflowWriter(TrackingWriter):
    """Logs to an MLflow run of ``experiment_name`` (created if missing) at ``tracking_uri`` (``http://...``,
    ``sqlite:///mlflow.db``, ``file:/path/mlruns``; None: ``MLFLOW_TRACKING_URI``); see the module doc."""

    kind = "mlflow"
    #: seconds the start-up check waits for an ``http(s)`` server (MLflow retries one that is down for ~4 min)
    CONNECT_TIMEOUT_S = 5.0

    def __init__(self, work_dir: Union[str, os.PathLike, None] = None, logger: Any = None,
                 tracking_uri: Optional[str] = None, experiment_name: str = "rlearn", run_name: Optional[str] = None,
                 tags: Optional[Mapping[str, str]] = None) -> None:
        super().__init__(work_dir, logger, run_name)
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.tags = dict(tags or {})
        self.client: Any = None
        self._last_axes: Optional[tuple] = None
        #: resumed run: per metric, the last step it holds (a kill inside a batch may have logged part of a row)
        self._held_steps: Dict[str, int] = {}

    def _start(self, run_id: Optional[str], config: Optional[Mapping[str, Any]]) -> str:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        self._check_server(self.client.tracking_uri)
        if run_id is not None:
            self.client.update_run(run_id, status="RUNNING")
            self._held_steps = {key: max((p.step for p in self.client.get_metric_history(run_id, key)), default=-1)
                                for key in self.client.get_run(run_id).data.metrics}
        else:
            experiment = self.client.get_experiment_by_name(self.experiment_name)
            experiment_id = (experiment.experiment_id if experiment is not None
                             else self.client.create_experiment(self.experiment_name))
            run_id = self.client.create_run(experiment_id, run_name=self.run_name, tags=self.tags).info.run_id
        self.run_id = run_id  # _log_config logs to it
        if config is not None:
            self._log_config(config)
        return run_id

    def _check_server(self, uri: str) -> None:
        """``OSError`` naming ``uri`` when an ``http(s)`` server gives no answer (any will do) to one request
        within :attr:`CONNECT_TIMEOUT_S`."""
        if not uri.lower().startswith(("http://", "https://")):
            return
        from mlflow.utils.credentials import get_default_host_creds
        from mlflow.utils.rest_utils import http_request

        try:
            http_request(get_default_host_creds(uri), "/api/2.0/mlflow/experiments/get-by-name", "GET",
                         max_retries=0, timeout=self.CONNECT_TIMEOUT_S, raise_on_status=False,
                         params={"experiment_name": self.experiment_name})
        except Exception as exc:  # noqa: BLE001 - MLflow wraps every connection error in MlflowException
            why = _unreachable(exc, self.CONNECT_TIMEOUT_S)
            raise OSError(f"MLflow tracking server {uri} cannot be reached ({why}); is it running, and is "
                          "tracking_uri right?") from None  # the reason is in the message

    def _log_row(self, row: Row, step_iter: int, step_env: int) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        metrics: List[Any] = []
        if self._last_axes != (step_iter, step_env):
            metrics.append(Metric("envstep", float(step_env), stamp, step_iter))
            self._last_axes = (step_iter, step_env)
        metrics.extend(Metric(name, float(value), stamp, step_iter) for name, value in row.items())
        if self._held_steps:
            metrics = [m for m in metrics if self._held_steps.get(m.key, -1) < step_iter]
        for start in range(0, len(metrics), _METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[start : start + _METRICS_PER_BATCH])

    def _log_config(self, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        from rlearn.config import flatten

        wanted = {key: (value if isinstance(value, str) else json.dumps(value, default=repr))[:_PARAM_VALUE_LIMIT]
                  for key, value in flatten(config).items()}
        existing = self.client.get_run(self.run_id).data.params
        changed = sorted(key for key, value in wanted.items() if key in existing and existing[key] != value)
        if changed and self.logger is not None:
            self.logger.warning("MlflowWriter: run %s keeps its logged value of parameter(s) %s (MLflow cannot "
                                "change a parameter); this run's values are in <work_dir>/config.py",
                                self.run_id, ", ".join(changed))
        params = [Param(key, value) for key, value in wanted.items() if key not in existing]
        for start in range(0, len(params), _PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[start : start + _PARAMS_PER_BATCH])

    def _finish(self) -> None:
        if self.client is not None and self.run_id is not None:
            self.client.set_terminated(self.run_id)


def _unreachable(exc: BaseException, timeout_s: float) -> str:
    """Why a request to the tracking server failed, in a few words."""
    text = f"{exc} {exc.__cause__ or ''}"
    if "timed out" in text.lower() or "timeout" in type(exc.__cause__).__name__.lower():
        return f"no answer within {timeout_s:g} s"
    for marker, reason in (("Connection refused", "connection refused"), ("NameResolution", "unknown host"),
                           ("Name or service not known", "unknown host"), ("SSL", "TLS error")):
        if marker in text:
            return reason
    return text.strip()[:200]
