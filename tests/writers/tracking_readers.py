"""Reading back what the W&B and MLflow writers logged, with each service's own reader (shared by the tests).

W&B: the offline run files (``<WANDB_DIR>/wandb/offline-run-*/run-<id>.wandb``) through wandb's
``DataStore`` and its ``Record`` protocol buffer. MLflow: ``mlflow.tracking.MlflowClient`` on the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest


def wandb_records(wandb_dir: Path, run_id: str) -> Tuple[List[Dict[str, Any]], Dict[str, Any], List[Any]]:
    """``(history rows, config, metric definitions)`` of every offline session of run ``run_id``, sessions
    in the order they ran. History rows leave out W&B's own ``_step``, ``_timestamp`` and ``_runtime``."""
    datastore = pytest.importorskip("wandb.sdk.internal.datastore",
                                    reason="this wandb has no DataStore to read offline run files")
    import wandb
    from wandb.proto import wandb_internal_pb2

    wandb.teardown()  # wait until W&B's service process has written everything (it writes asynchronously)

    files = sorted(Path(wandb_dir).glob(f"wandb/offline-run-*-{run_id}*/run-{run_id}.wandb"))  # a session started in the same second as the one before gets a -1 suffix
    assert files, f"no offline run files of {run_id} under {wandb_dir}"
    rows: List[Dict[str, Any]] = []
    config: Dict[str, Any] = {}
    metrics: List[Any] = []
    for path in files:
        store = datastore.DataStore()
        store.open_for_scan(str(path))
        while True:
            data = store.scan_data()
            if data is None:
                break
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            kind = record.WhichOneof("record_type")
            if kind == "history":
                row = {}
                for item in record.history.item:
                    key = item.key or "/".join(item.nested_key)
                    if not key.startswith("_"):
                        row[key] = json.loads(item.value_json)
                rows.append(row)
            elif kind == "run":
                for item in record.run.config.update:
                    config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
            elif kind == "config":
                for item in record.config.update:
                    config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
            elif kind == "metric":
                metrics.append(record.metric)
    return rows, config, metrics


def mlflow_history(tracking_uri: str, run_id: str) -> Tuple[Dict[str, List[Tuple[int, float]]], Dict[str, str], str]:
    """``({metric: [(step, value)...]}, params, status)`` of an MLflow run through ``MlflowClient``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    run = client.get_run(run_id)
    history = {}
    for key in run.data.metrics:
        points = client.get_metric_history(run_id, key)
        history[key] = [(p.step, p.value) for p in sorted(points, key=lambda p: (p.step, p.timestamp))]
    return history, dict(run.data.params), run.info.status


def wandb_steps(wandb_dir: Path, run_id: str) -> List[List[int]]:
    """Per offline session of run ``run_id`` (in the order they ran), the ``_step`` of each history row, as W&B's
    own reader (``DataStore``) finds it in the transaction log."""
    datastore = pytest.importorskip("wandb.sdk.internal.datastore",
                                    reason="this wandb has no DataStore to read offline run files")
    import wandb
    from wandb.proto import wandb_internal_pb2

    wandb.teardown()
    sessions = []
    for path in sorted(Path(wandb_dir).glob(f"wandb/offline-run-*-{run_id}*/run-{run_id}.wandb")):
        store = datastore.DataStore()
        store.open_for_scan(str(path))
        steps = []
        while (data := store.scan_data()) is not None:
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            if record.WhichOneof("record_type") == "history":
                steps.append(record.history.step.num)
        sessions.append(steps)
    return sessions
